"""The one table of what a run is measured by: each metric's column (its field in the typed rows of
model/measured.py, which `metrics.run_metrics` fills and the report's tables carry), its label and
unit, which way is better, and its name in a claim (docs/experiments.md, "Claims"). The report,
the summary and the claims read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    column: str  # its field in model/measured.py's rows (per run, or per cc group)
    label: str  # for tables and axes
    unit: str
    better: int  # +1 higher is better, -1 lower, 0 neither (a share)
    term: str | None = None  # its name in a claim; None when claims do not use it
    meaning: str = ""  # what a claim term means, for the claim language's reference
    steady: bool = False  # measured over the steady window, so a claim's steady_from_s moves it
    compared: bool = True  # in a run's metric table and baseline-vs-candidate comparisons
    # The values the metric can take, where it has bounds: an interval shown or judged for it is
    # kept inside them (a t-interval of 0.753 +- 0.503 for a Jain index claims values it cannot have).
    bounds: tuple[float, float] | None = None


UNIT = (0.0, 1.0)


RUN_METRICS: tuple[Metric, ...] = (
    Metric("throughput_mbps", "aggregate throughput", "Mbit/s", +1, "throughput_mbps", "aggregate goodput, Mbit/s"),
    Metric("utilisation", "link utilisation", "", +1, "utilisation", "delivered bytes / link capacity (0-1)"),
    Metric("jain", "Jain's index (whole run)", "", +1, "jain", "Jain's index of the flows' mean throughputs, whole run",
           bounds=UNIT),
    Metric("jain_steady", "Jain's index (steady state)", "", +1, "jain_steady", "Jain's index in steady state",
           steady=True, bounds=UNIT),
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
           "steady share of the flow with the smallest RTT", steady=True, compared=False, bounds=UNIT),
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
