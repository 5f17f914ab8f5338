"""`cctest record`: the compact record (cctest/model/compact.py) of every run directory under a folder,
measured as `check` and `report` measure it, written below another at the same relative paths."""

from __future__ import annotations

import math
from pathlib import Path

from ..model.compact import RECORD_FILE, CompactRecord, CompactRecordError, Metrics, SteadyWindows
from .load import Run


def of_run(run: Run, skip_s: float) -> CompactRecord:
    """The record of a run read from its directory (analysis.load.load_run), its metrics computed
    with the default bin and the steady state from `skip_s`."""
    from ..base.jsonsafe import json_safe
    from . import metrics
    from .provenance import scenario_yaml
    from .run_point import RunSeries, window_means

    result = metrics.run_metrics(run.record, run.tables, skip_s=skip_s)
    series = RunSeries.of(result)
    flows = [int(f["flow"]) for f in result.flows]
    ends = [f["t_end"] for f in result.flows if isinstance(f.get("t_end"), float) and math.isfinite(f["t_end"])]
    rows = []
    for t0 in range(math.ceil(max(ends)) + 1 if ends else 0):
        means = window_means(series, t0)
        if means is None:
            break
        rows.append([float(means[f]) if f in means.index else None for f in flows])
    return CompactRecord(meta=run.record.dump(), scenario_yaml=scenario_yaml(run), checks=run.checks, notes=run.notes,
                         metrics=Metrics(skip_s=skip_s, run=json_safe(result.run.as_dict()),
                                         flows=json_safe(result.flows),
                                         groups=json_safe([g.as_dict() for g in result.groups])),
                         steady=SteadyWindows(flows=flows, mbps=rows), goodput_mbps=_goodput(run))


def _goodput(run: Run) -> float | None:
    from .metrics import goodput_mbps

    if len(run.record.flows or []) != 1:
        return None
    value = goodput_mbps(run)
    return value if math.isfinite(value) else None


def plan(src: Path, dest: Path, skip_s: float) -> list[tuple[Path, str]]:
    """(where, text) of the record of every run directory under `src`, below `dest` at the run's path
    relative to `src`; nothing is written. A run that cannot be read or measured, or a destination
    that is not a file of its own outside the runs, is bad input."""
    from ..base import atomic
    from .load import find_run_dirs, load_run, shown

    found = find_run_dirs(src)
    records = [d for d in found if not (d / "meta.json").exists()]
    if records:
        raise CompactRecordError(f"{shown(records[0])}: a compact record, not a run directory; cctest record "
                                 "reads run directories (with meta.json)")
    outputs = [(dest / d.relative_to(src) / RECORD_FILE, d) for d in found]
    atomic.check_outputs([(path, f"the record of {shown(d)}") for path, d in outputs], run_dirs=found)
    planned = []
    for path, run_dir in outputs:
        run = load_run(run_dir)
        try:
            record = of_run(run, skip_s)
        except Exception as error:  # noqa: BLE001 - named, and nothing is written
            raise CompactRecordError(f"{shown(run_dir)}: could not be measured ({type(error).__name__}: "
                                     f"{error}); record it once `cctest report` reads it") from None
        planned.append((path, record.to_json()))
    return planned


def write(planned: list[tuple[Path, str]]) -> int:
    """Write the planned records (each whole or not at all); the bytes written."""
    from ..base import atomic

    total = 0
    for path, text in planned:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
        total += len(text.encode())
    return total
