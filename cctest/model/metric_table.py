"""The metrics a run is measured by, as one table: each metric's column, its label and unit, which
way is better and its name in a claim (docs/experiments.md, "Claims"); and the table's typed rows:
a run's (RunValues), one per congestion control (CcValues), each a field per column (and the few
that say how the run was measured), with all of one run's metrics (RunMetrics: the rows, the
per-flow rows and the time series). analysis/metrics.py fills the rows; the claim language, the
summary, the claims and the report read the table; a compact record (model/compact.py) gives the
rows back without the series.

A metric is a row of RUN_METRICS or CC_METRICS and its field in RunValues or CcValues: the field's
place is its column's in the summary tables and the compact record, the row's its place in the
report's tables (tests/unit/test_metrics.py holds the two together)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Metric:
    column: str  # its field in the typed rows below (RunValues, or CcValues per cc group)
    label: str  # for tables and axes
    unit: str
    better: int  # +1 higher is better, -1 lower, 0 neither (a share)
    term: str | None = None  # its name in a claim; None when claims do not use it
    meaning: str = ""  # what a claim term means: docs/experiments.md's table of terms (scripts/doc-lists.py)
    steady: bool = False  # measured over the steady window, so a claim's steady_from_s moves it
    compared: bool = True  # in a run's metric table and baseline-vs-candidate comparisons
    # The values the metric can take, where it has bounds: an interval shown or judged for it is
    # kept inside them (a t-interval of 0.753 +- 0.503 for a Jain index claims values it cannot have).
    bounds: tuple[float, float] | None = None


UNIT = (0.0, 1.0)


RUN_METRICS: tuple[Metric, ...] = (
    Metric("throughput_mbps", "aggregate throughput", "Mbit/s", +1, "throughput_mbps", "aggregate goodput, Mbit/s"),
    Metric("utilisation", "link utilisation", "", +1, "utilisation",
           "payload delivered while a flow was active / the payload the link carries meanwhile (0-1)"),
    Metric("jain", "Jain's index (whole run)", "", +1, "jain", "Jain's index of the flows' mean throughputs, whole run",
           bounds=UNIT),
    Metric("jain_steady", "Jain's index (steady state)", "", +1, "jain_steady",
           "Jain's index of the flows' mean throughputs in steady state", steady=True, bounds=UNIT),
    Metric("retransmits", "retransmissions", "segments", -1, "retransmits_total", "all flows' retransmitted segments"),
    Metric("retransmits_per_mb", "retransmissions per MB", "", -1),
    Metric("bottleneck_drops", "bottleneck drops", "packets", -1, "drops", "bottleneck drops, packets"),
    Metric("bottleneck_loss_rate", "bottleneck loss rate", "", -1, "loss_rate",
           "bottleneck drops / packets offered (0-1)", bounds=UNIT),
    Metric("mean_queue_delay_ms", "mean queue delay (backlog/rate)", "ms", -1, "queue_delay_ms",
           "mean bottleneck queue delay (backlog / rate), ms"),
    Metric("p95_queue_delay_ms", "p95 queue delay (backlog/rate)", "ms", -1, "p95_queue_delay_ms",
           "95th percentile bottleneck queue delay, ms"),
    Metric("mean_srtt_qdelay_ms", "mean srtt - min RTT", "ms", -1, "srtt_qdelay_ms",
           "mean srtt minus min RTT over flows, ms"),
    Metric("mean_queue_bdp", "mean queue occupancy", "BDP", -1, "queue_bdp", "mean bottleneck queue occupancy, BDP"),
    Metric("max_queue_bdp", "max queue occupancy", "BDP", -1, "max_queue_bdp",
           "largest bottleneck queue occupancy, BDP"),
    # most runs have one RTT, so no short flow: not in a run's table, only where it was measured
    Metric("short_rtt_flow_share", "short-RTT flow share", "", 0, "short_rtt_share",
           "steady share of the flow with the smallest RTT (none unless the flows' RTTs differ)", steady=True,
           compared=False, bounds=UNIT),
)

# Per congestion control: columns of the per-run x cc table, named in a claim as term(cc).
CC_METRICS: tuple[Metric, ...] = (
    Metric("share", "share of delivered bytes", "", 0, "share",
           "fraction of all delivered bytes that cc's flows carried", bounds=UNIT),
    Metric("steady_share", "steady-state share", "", 0, "steady_share", "that fraction in steady state", steady=True,
           bounds=UNIT),
    Metric("throughput_mbps", "goodput", "Mbit/s", +1, "throughput", "cc's flows' goodput together, Mbit/s"),
    Metric("retransmits", "retransmissions", "segments", -1, "retransmits",
           "cc's flows' retransmitted segments together"),
    # Per byte delivered: a control that delivers less retransmits less in total without retransmitting
    # less per byte (Modest BBR against BBR), so a comparison of two controls' retransmissions reads this.
    Metric("retransmits_per_mb", "retransmissions per MB delivered", "segments/MB", -1, "retrans_per_mb",
           "cc's flows' retransmitted segments per MB (1e6 bytes) they delivered"),
    Metric("mean_qdelay_ms", "queueing delay", "ms", -1, "qdelay",
           "mean queueing delay cc's flows saw (srtt - their min RTT), ms"),
    Metric("startup_exit_s", "Startup exit", "s", -1, "startup_s",
           "seconds from a flow's first byte to its module leaving Startup (this project's modules only: they "
           "trace their mode), mean over cc's flows"),
)

COMPARED = tuple(m for m in RUN_METRICS if m.compared)
RUN_TERMS = {m.term: m for m in RUN_METRICS if m.term}
CC_TERMS = {m.term: m for m in CC_METRICS if m.term}
STEADY_RUN_TERMS = tuple(t for t, m in RUN_TERMS.items() if m.steady)
STEADY_CC_TERMS = tuple(t for t, m in CC_TERMS.items() if m.steady)
BOUNDED_RUN_TERMS = {t: m.bounds for t, m in RUN_TERMS.items() if m.bounds}
BOUNDED_CC_TERMS = {t: m.bounds for t, m in CC_TERMS.items() if m.bounds}


# -- the table's rows -----------------------------------------------------------------------------

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
    """One run's row: how it was measured, then RUN_METRICS' columns. A value not measured is NaN."""

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
    """One congestion control's row of a run (all its flows together): CC_METRICS' columns and the
    band of its steady shares."""

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
