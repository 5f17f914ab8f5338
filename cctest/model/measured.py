"""What a run measured, typed: the per-run row and one row per congestion control, each a field per
column of model/metric_table.py (and the few that say how the run was measured), the per-flow
rows and the time series. analysis/metrics.py computes it from a run's tables; a compact record
(model/compact.py) gives it back without the series."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

NAN = math.nan


class Row:
    """A row of metrics: its fields as plain data, in declaration order (the columns' order in the
    summary tables and the compact record), and built from such data."""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def known(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The entries of `data` that are fields of this row (a record holds no others)."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return {k: v for k, v in data.items() if k in names}


@dataclass
class RunValues(Row):
    """One run's row: how it was measured, then metric_table.RUN_METRICS' columns. A value not
    measured is NaN."""

    bin_s: float = NAN  # the throughput bin
    throughput_source: str = "none"  # what the per-flow throughput was read from
    steady_t0_s: float = NAN  # the steady window
    steady_t1_s: float = NAN
    mean_srtt_qdelay_ms: float = NAN
    flows: int = 0
    bytes: float = NAN
    duration_s: float = NAN
    throughput_mbps: float = NAN
    jain: float = NAN
    jain_steady: float = NAN
    utilisation: float = NAN
    retransmits: float = NAN
    retransmits_per_mb: float = NAN
    short_rtt_flow_share: float = NAN
    bottleneck_drops: float = NAN
    bottleneck_loss_rate: float = NAN
    mean_queue_delay_ms: float = NAN
    p95_queue_delay_ms: float = NAN
    mean_queue_bdp: float = NAN
    max_queue_bdp: float = NAN


@dataclass
class CcValues(Row):
    """One congestion control's row of a run (all its flows together): metric_table.CC_METRICS'
    columns and the band of its steady shares."""

    cc: Any = None  # its name as the flows record it
    flows: int = 0
    bytes: float = NAN
    share: float = NAN
    steady_share: float = NAN
    steady_share_p25: float = NAN  # the 0.5 s steady shares' quartiles
    steady_share_p75: float = NAN
    retransmits: float = NAN
    retransmits_per_mb: float = NAN
    mean_mbps: float = NAN  # per flow
    startup_exit_s: float = NAN
    mean_qdelay_ms: float = NAN

    @property
    def throughput_mbps(self) -> float:
        """Its flows' goodput together (the row has their mean)."""
        return float(self.mean_mbps) * (self.flows or 0)


class WindowMeans(Protocol):
    """Each flow's mean throughput over the steady window from a whole second (compact.SteadyWindows)."""

    def means(self, t0: float) -> pd.Series | None: ...


@dataclass
class RunMetrics:
    """All metrics of one run. `flows` is one row per flow (metrics.flow_totals' columns and the
    per-flow metrics: which columns a row has depends on the tables the run has)."""

    run: RunValues
    flows: list[dict[str, Any]] = field(default_factory=list)
    groups: list[CcValues] = field(default_factory=list)
    series: dict[str, pd.DataFrame] = field(default_factory=dict)  # the tidy time series the report plots
    windows: WindowMeans | None = None  # a compact record's steady-window means, in place of the series

    def group(self, cc: str) -> CcValues | None:
        """The row of `cc`, None when no flow of the run ran it."""
        return next((g for g in self.groups if g.cc == cc), None)
