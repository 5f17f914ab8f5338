"""A lone BBR sender's model and queue, as `ss -tin` reports them: the figures the VM tests and
bench/core_equivalence.py hold this project's BBRv1 core and the kernel's bbr to."""

from __future__ import annotations

import pandas as pd

from ..model.record import Link
from .derived import link_mtu, payload_fraction

QUEUED_RTT_FACTOR = 1.5  # srtt above 1.5 x the base RTT: a queue of more than half a BDP
OVERESTIMATE = 1.03  # a bandwidth estimate 3 % above the payload rate: a sample the link cannot give


def bbr_model_figures(link: Link, ss: pd.DataFrame, flow: int = 0, settle_s: float = 2.0) -> dict:
    """One BBR flow's model and queue after `settle_s` (slow start and Drain), on a fixed-rate `link`
    (a run record's).

    srtt's minimum and quantiles (ms) and `queued`, the share of samples with srtt above QUEUED_RTT_FACTOR x the
    base RTT; `bw_over_capacity`, the median bandwidth estimate over the link's payload rate, and
    `overestimated`, the share of samples where it exceeds OVERESTIMATE; `cwnd_over_bdp`, the median
    cwnd over the payload BDP in MSS packets; `pacing_margin`, the median pacing rate over gain x
    estimate; `min_rtt_ms`, the median RTprop; `gain_1.25` and `gain_0.75`, the shares of samples in
    ProbeBW's up and down phases."""
    if link.rate_mbps is None or link.rtt_ms is None:
        raise ValueError("the model needs the link's rate_mbps and rtt_ms")
    rtt_ms = float(link.rtt_ms)
    g = ss[(ss["flow"] == flow) & (ss["t_s"] > settle_s)].dropna(subset=["srtt_ms", "bbr_bw_bps"])
    payload_bps = float(link.rate_mbps) * 1e6 * payload_fraction(link_mtu(link))
    bdp_packets = payload_bps / 8 * rtt_ms / 1e3 / g["mss"].median()
    bw = g["bbr_bw_bps"] / payload_bps
    gain = g["bbr_pacing_gain"]
    return {
        "samples": len(g),
        "srtt_min_ms": float(g["srtt_ms"].min()),
        "srtt_p05_ms": float(g["srtt_ms"].quantile(0.05)),
        "srtt_p50_ms": float(g["srtt_ms"].median()),
        "srtt_p90_ms": float(g["srtt_ms"].quantile(0.9)),
        "queued": float((g["srtt_ms"] > QUEUED_RTT_FACTOR * rtt_ms).mean()),
        "bw_over_capacity": float(bw.median()),
        "overestimated": float((bw > OVERESTIMATE).mean()),
        "cwnd_over_bdp": float((g["cwnd"] / bdp_packets).median()),
        "pacing_margin": float((g["pacing_rate_bps"] / (gain * g["bbr_bw_bps"])).median()),
        "min_rtt_ms": float(g["bbr_mrtt_ms"].median()),
        "gain_1.25": float((gain == 1.25).mean()),
        "gain_0.75": float((gain == 0.75).mean()),
    }
