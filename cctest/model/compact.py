"""The compact run record: one small file per run that `check`, `report`'s claims and tables, the
reproduction page and `validate` read in place of the run directory.

A run directory is hundreds of kilobytes of tables (megabytes with its raw captures); what the
verdicts rest on is a few kilobytes: the run's meta.json, its scenario.yaml as run, its health
(checks.json), the notes its loading made, and the metrics `metrics.run_metrics` computed from its
tables (the per-run row, one row per flow and one per congestion control). Claims with
`steady_from_s` re-measure the steady window from another start; a record keeps no time series,
so it keeps, for every whole second t0 of the run, each flow's mean throughput over the steady
window from t0 (the one input those terms need). A claim that starts its steady window elsewhere,
a report option that re-bins or moves the steady start, and the figures of time series need the
full run directory, and say so.

`cctest record SRC DEST` writes DEST/<the run's path below SRC>/record.json for every run directory
under SRC (analysis/records.py); a directory holding record.json reads as a run wherever run directories are accepted.
Reading one is as guarded as reading a run directory (runfiles: no link followed, regular files
only, a bounded size) and every field is typed; anything else is bad input naming the file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, model_validator

from ..base.errors import BadInput
from . import versioned
from .metric_table import CcValues, RunMetrics, RunValues
from .record import Int, Number, Text, _shown

if TYPE_CHECKING:
    import pandas as pd

RECORD_FILE = "record.json"
RECORD_VERSION = 1  # what this code writes
READABLE_VERSIONS = (1,)
MAX_RECORD_BYTES = 1 << 20  # a record is kilobytes (a 300 s run of four flows: about 30 kB)


def shown(path: Path) -> str:
    """A path as text any message can hold (analysis.load.shown, which reads records through here)."""
    return os.fsencode(path).decode("utf-8", errors="replace")


class CompactRecordError(BadInput):
    """A record.json this code cannot read, or runs it cannot record: the message names the file."""


def _value(value: Any) -> int | float | str | bool | None:
    # a metric as run_metrics gives it: a number, a text (a flow's cc) or null, which stands for NaN
    if value is None or isinstance(value, (bool, int, str)) or isinstance(value, float) and math.isfinite(value):
        return value
    raise ValueError(f"must be a number, text or null, not {_shown(value)}")


Value = Annotated[int | float | str | bool | None, PlainValidator(_value)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Metrics(Strict):
    """metrics.run_metrics of the run (without its series), and the options it was computed with."""

    skip_s: Number  # the steady state's start (check/report --skip-s)
    bin_ms: Number | None = None  # the throughput bin (report --bin-ms); null: the default, one RTT
    run: dict[str, Value]
    flows: list[dict[str, Value]]
    groups: list[dict[str, Value]]

    def result(self, windows: SteadyWindows) -> RunMetrics:
        """The run_metrics result the report and the claims read, NaN where the record has null."""
        def nan(row: dict[str, Any]) -> dict[str, Any]:
            return {k: math.nan if v is None else v for k, v in row.items()}

        return RunMetrics(RunValues(**RunValues.known(nan(self.run))), [nan(f) for f in self.flows],
                          [CcValues(**CcValues.known(nan(g))) for g in self.groups], windows=windows)


class SteadyWindows(Strict):
    """Each flow's mean throughput over the steady window from t0 = 0, 1, 2 ... s: row k is t0 = k,
    one value per flow of `flows` (null: the flow has no active bin in that window)."""

    flows: list[Int]
    mbps: list[list[Number | None]]

    @model_validator(mode="after")
    def _rows_match_flows(self) -> SteadyWindows:
        if any(len(row) != len(self.flows) for row in self.mbps):
            raise ValueError(f"every row of mbps must hold one value per flow ({len(self.flows)})")
        return self

    def means(self, t0: float) -> pd.Series | None:
        """The window means from t0 as metrics.window_mean_mbps gives them, None when t0 is not a
        whole second of the run."""
        import pandas as pd

        if not math.isfinite(t0) or t0 != int(t0) or not 0 <= t0 < len(self.mbps):
            return None
        kept = [(flow, mbps) for flow, mbps in zip(self.flows, self.mbps[int(t0)], strict=True) if mbps is not None]
        index = pd.Index([flow for flow, _ in kept], dtype="int64", name="flow")
        return pd.Series([float(mbps) for _, mbps in kept], index=index, dtype="float64", name="mbps")


class CompactRecord(Strict):
    """record.json: one run, everything its verdicts and tables are computed from."""

    record_version: Int = RECORD_VERSION
    meta: dict[str, Any]  # meta.json as read (record.RunRecord checks it when the record is read)
    scenario_yaml: Text | None = None  # the scenario as run, as its text
    checks: dict[str, Any] | None = None  # checks.json: the emulation-health verdict
    notes: list[Text] = []  # what reading the run directory noted (a table absent, a value read as a number)
    metrics: Metrics
    steady: SteadyWindows
    goodput_mbps: Number | None = None  # a one-flow run's goodput as `validate` reads it (receiver bytes
    # over the iperf3 intervals' span); null for other runs

    def to_json(self) -> str:
        # null for NaN, one line per top-level key: small, and a diff shows what changed
        from ..base.jsonsafe import json_safe

        data = json_safe(self.model_dump(mode="python"))
        body = ",\n".join(f"{json.dumps(key)}: {json.dumps(value, allow_nan=False, separators=(',', ':'))}"
                          for key, value in data.items())
        return "{\n" + body + "\n}\n"


def read(record_dir: Path) -> CompactRecord:
    """The record in `record_dir`, read by the one reader of run directories (no link followed, a
    regular file, at most MAX_RECORD_BYTES), or CompactRecordError naming the file."""
    from ..base.safeload import Refused
    from . import runfiles

    path = record_dir / RECORD_FILE
    try:
        data = runfiles.read_bytes(record_dir, RECORD_FILE, MAX_RECORD_BYTES, "a run record")
    except Refused as error:
        raise CompactRecordError(f"{shown(path)}: unreadable ({str(error).removeprefix(f'{path}: ')})") from None
    if data is None:
        raise CompactRecordError(f"{shown(path)}: no such file")
    fields = ", ".join(CompactRecord.model_fields)
    return versioned.parse(data, shown(path), CompactRecord, version_key="record_version",
                           readable=READABLE_VERSIONS, noun="a record", error=CompactRecordError,
                           unknown_field=f"not a field of a record (it has {fields})")
