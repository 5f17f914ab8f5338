"""A run as a claim sees it: where it lies (scenario, suite tags, matrix point, repetition), its
health, the builds a verdict may not mix, its terms (the typed rows of model/metric_table.py), and
what re-measuring its steady state from another start needs. Built once from the runs and their
metrics; claims.py judges lists of them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model.metric_table import CcValues, RunMetrics, RunValues, WindowMeans
from .provenance import engine_build, module_builds, scenario_tags
from .stats import jain_index
from .summary import failing_checks, group_key, group_label, matrix_value

if TYPE_CHECKING:
    import pandas as pd

    from .load import Run


@dataclass
class RunSeries:
    """What re-measuring a run's steady state needs: its binned per-flow throughput (metrics'
    `series["binned"]`) and its flows (flow, cc, rtt_ms, t_start, t_end); for a compact record
    (cctest/model/compact.py), which keeps no series, the window means it recorded instead."""

    binned: pd.DataFrame
    flows: list[dict[str, Any]]
    windows: WindowMeans | None = None  # per-flow window means from each whole second

    @classmethod
    def of(cls, result: RunMetrics) -> RunSeries:
        import pandas as pd

        return cls(result.series.get("binned", pd.DataFrame()), list(result.flows), result.windows)


@dataclass(eq=False)  # a run is itself: two runs with equal values are still two
class RunPoint:
    """One run: its place among the runs, its health and builds, and its terms."""

    run_id: str
    scenario: str | None = None
    tags: tuple[str, ...] = ()  # its scenario's, as run
    group: str = ""  # runs identical but for their repetition share it (summary.group_key)
    label: str = ""  # the matrix point's label
    matrix: dict[str, Any] = field(default_factory=dict)  # as the summary's matrix.* columns hold it
    repetition: int | None = None
    health: str | None = None  # checks.json's verdict
    health_failed: str = ""  # the checks it failed on
    module_builds: str = ""  # provenance.module_builds
    engine_build: str = ""  # provenance.engine_build
    values: RunValues = field(default_factory=RunValues)  # the run's terms
    ccs: dict[Any, CcValues] = field(default_factory=dict)  # each cc's terms, by cc
    series: RunSeries | None = None  # None: steady terms cannot be re-measured

    @classmethod
    def of(cls, run: Run, result: RunMetrics, with_series: bool = True) -> RunPoint:
        record = run.record
        side = run.side
        return cls(run.run_id, record.scenario, tuple(scenario_tags(run)),
                   (f"{side} | " if side else "") + group_key(record),
                   (f"[{side}] " if side else "") + group_label(record),
                   {k: matrix_value(v) for k, v in (record.matrix or {}).items()}, record.repetition,
                   (run.checks or {}).get("verdict"), failing_checks(run.checks), module_builds(record),
                   engine_build(record), result.run, {g.cc: g for g in result.groups},
                   RunSeries.of(result) if with_series else None)


def points_of(runs: list[Run], results: list[RunMetrics], with_series: bool = True) -> list[RunPoint]:
    """The runs as claims see them (`results`: each run's metrics, in the runs' order)."""
    return [RunPoint.of(run, result, with_series) for run, result in zip(runs, results, strict=True)]


def window_means(series: RunSeries | None, t0: float) -> pd.Series | None:
    """Each flow's mean throughput over the steady window from t0 (metrics.steady_window with skip
    t0), by flow; None when the run has no series (or its record no window from t0)."""
    import pandas as pd

    from .metrics import steady_window, window_mean_mbps

    if series is None or not series.flows:
        return None
    if series.windows is not None:
        return series.windows.means(t0)
    if series.binned is None or series.binned.empty:
        return None
    flows = pd.DataFrame(series.flows)
    s0, s1 = steady_window(flows[["flow", "t_start", "t_end"]], t0)
    return window_mean_mbps(series.binned, s0, s1)


def steady_from(series: RunSeries | None, t0: float) -> dict[str, Any]:
    """jain_steady, short_rtt_flow_share and each cc's steady_share over [t0, the report's steady
    end): metrics.steady_window with skip t0. Empty when the run has no series."""
    import pandas as pd

    from .metrics import short_rtt_flow

    means = window_means(series, t0)
    if means is None or series is None:
        return {}
    per_flow = pd.DataFrame(series.flows).set_index("flow")
    mbps = pd.Series([means.get(f, math.nan) for f in per_flow.index], index=per_flow.index).fillna(0.0)
    total = float(mbps.sum())
    out: dict[str, Any] = {"jain_steady": jain_index(means.to_numpy()) if len(means) else math.nan,
                           "short_rtt_flow_share": math.nan, "steady_share": {}}
    for cc, group in per_flow.groupby("cc"):
        out["steady_share"][cc] = float(mbps[group.index].sum()) / total if total > 0 else math.nan
    short = short_rtt_flow(per_flow.get("rtt_ms", pd.Series(dtype=float)))
    if short is not None and total > 0:
        out["short_rtt_flow_share"] = float(mbps[short]) / total
    return out
