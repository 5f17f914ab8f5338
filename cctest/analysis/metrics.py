"""Metrics: pure functions on the tidy tables of a run directory.

Every function here takes pandas DataFrames shaped as docs/run-directory.md describes (one row per
sample, long format) plus plain numbers, and returns numbers or new tidy DataFrames. Nothing reads
files, nothing plots: `cctest.report` does both, so every number in a report can be unit-tested on
hand-computed tables.

Conventions
- Throughput is in Mbit/s (1e6 bit/s), time in seconds, delays in milliseconds.
- A flow's *active period* is derived.flow_spans: launched_s + iperf3's elapsed test time.
- Throughput over time is what the receivers got (ss bytes_acked growth, per flow) and what the
  bottleneck sent (qdisc sent_bytes growth, aggregate), in bins of derived.default_bin_s.
- Jain's fairness index and the mean with its 95 % interval are cctest.analysis.stats'.
- Quantities that the health checks also use (flow spans, counter growth, the bottleneck qdisc,
  link fullness, BDP, the link rate) are defined once in cctest.analysis.derived.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..model.metric_table import CcValues, RunMetrics, RunValues
from ..model.record import Link, RunRecord
from . import derived
from .defaults import DEFAULT_BIN_MS, DEFAULT_JAIN_WINDOW_S, DEFAULT_SKIP_S
from .stats import jain_index

if TYPE_CHECKING:
    from .load import Run

RUN_TAIL_S = 1.0  # qdisc samples up to this long after the last flow ends still count
SHARE_BIN_S = 0.5  # 004 Fig. 10: shares "averaged over half second intervals"
TABLE_BIN_S = 1.0  # 003 Table 1: max/min/avg throughput over 1 s intervals

# ---------------------------------------------------------------------------------------------
# Throughput
# ---------------------------------------------------------------------------------------------


def _cumulative_points(g: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Piecewise-linear cumulative bytes of one flow: bytes spread evenly inside each interval."""
    g = g.sort_values("t_s")
    end = g["t_s"].to_numpy(float)
    start = end - g["interval_s"].to_numpy(float)
    b = g["bytes"].to_numpy(float)
    cum_after = np.cumsum(b)
    cum_before = cum_after - b
    t = np.empty(2 * len(end))
    c = np.empty(2 * len(end))
    t[0::2], t[1::2] = start, end
    c[0::2], c[1::2] = cum_before, cum_after
    # np.interp needs non-decreasing x; gaps or overlaps of a few microseconds are harmless.
    t = np.maximum.accumulate(t)
    return t, c


def interval_spans(throughput: pd.DataFrame) -> pd.DataFrame:
    """Span of each flow's iperf3 intervals: columns flow, t_start, t_end (seconds). Only for
    binning the intervals themselves; a flow's active period is derived.flow_spans."""
    if throughput.empty:
        return pd.DataFrame(columns=["flow", "t_start", "t_end"])
    end = throughput["t_s"].to_numpy(float)
    start = end - throughput["interval_s"].to_numpy(float)
    flows, inv = np.unique(throughput["flow"].to_numpy(), return_inverse=True)
    t_start = np.full(flows.size, np.inf)
    t_end = np.full(flows.size, -np.inf)
    np.minimum.at(t_start, inv, start)
    np.maximum.at(t_end, inv, end)
    return pd.DataFrame({"flow": flows, "t_start": t_start, "t_end": t_end})


STARTUP_MODE = 0  # the `mode` value this project's modules trace for Startup (bbr1 family and bbr3)


def startup_exit_s(cc_state: pd.DataFrame | None, spans: pd.DataFrame) -> dict[int, float]:
    """Per flow: seconds from the flow's first byte to its module's first traced mode other than
    Startup. Flows without a mode trace (kernel ccs) are absent; one that never left Startup gets
    NaN."""
    if cc_state is None or cc_state.empty or spans.empty:
        return {}
    modes = cc_state[cc_state["key"] == "mode"]
    starts = dict(zip(spans["flow"].astype(int), spans["t_start"].astype(float), strict=True))
    out = {}
    for flow, trace in modes.groupby("flow"):
        flow = int(flow)
        if flow not in starts:
            continue
        left = trace[trace["value"] != STARTUP_MODE]["t_s"]
        out[flow] = float(left.min()) - starts[flow] if len(left) else float("nan")
    return out


def binned_throughput(throughput: pd.DataFrame, bin_s: float = DEFAULT_BIN_MS / 1000.0,
                      t_end: float | None = None) -> pd.DataFrame:
    """Per-flow throughput in fixed bins from iperf3 intervals.

    Bytes of an interval are spread evenly over it, so re-binning conserves bytes exactly.
    Returns tidy rows: flow, t_s (bin start), bytes, mbps, active (bin overlaps the flow's active
    period). Bins cover [0, t_end) for every flow, zero outside its active period.
    """
    cols = ["flow", "t_s", "bytes", "mbps", "active"]
    if throughput.empty:
        return pd.DataFrame(columns=cols)
    spans = interval_spans(throughput).set_index("flow")
    if t_end is None:
        t_end = float(spans["t_end"].max())
    nbins = max(1, int(math.ceil(t_end / bin_s - 1e-9)))
    edges = np.round(np.arange(nbins + 1) * bin_s, 9)
    parts = []
    for flow, g in throughput.groupby("flow", sort=True):
        t, c = _cumulative_points(g)
        cum = np.interp(edges, t, c, left=0.0, right=c[-1])
        b = np.diff(cum)
        s, e = spans.loc[flow, "t_start"], spans.loc[flow, "t_end"]
        active = (edges[1:] > s + 1e-9) & (edges[:-1] < e - 1e-9)
        parts.append(pd.DataFrame({"flow": flow, "t_s": edges[:-1], "bytes": b,
                                   "mbps": b * 8 / bin_s / 1e6, "active": active}))
    return pd.concat(parts, ignore_index=True)


def flow_totals(throughput: pd.DataFrame, flows: pd.DataFrame | None = None,
                spans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-flow totals: flow, bytes (receiver total when flows.parquet has it, else the sum of the
    sender intervals), bytes_intervals, t_start, t_end, active_s, mean_mbps, retransmits.

    `spans` (derived.flow_spans) are the flows' active periods; the iperf3 intervals' when absent."""
    if spans is None:
        spans = interval_spans(throughput)
    spans = spans[["flow", "t_start", "t_end"]]
    sums = throughput.groupby("flow").agg(bytes_intervals=("bytes", "sum"),
                                          retrans_intervals=("retransmits", "sum")).reset_index()
    out = spans.merge(sums, on="flow", how="outer")
    if flows is not None and not flows.empty:
        keep = [c for c in ("flow", "bytes_received", "bytes_sent", "retransmits") if c in flows]
        out = out.merge(flows[keep], on="flow", how="outer")
    else:
        out["bytes_received"] = np.nan
        out["retransmits"] = np.nan
    out["bytes"] = out["bytes_received"].where(out["bytes_received"].notna(), out["bytes_intervals"])
    out["retransmits"] = out["retransmits"].where(out["retransmits"].notna(),
                                                  out["retrans_intervals"])
    out["active_s"] = out["t_end"] - out["t_start"]
    out["mean_mbps"] = out["bytes"] * 8 / out["active_s"] / 1e6
    return out.sort_values("flow").reset_index(drop=True)


def received_throughput(tables: dict, bin_s: float, spans: pd.DataFrame,
                        t_end: float | None = None) -> tuple[pd.DataFrame, str]:
    """Per-flow throughput in `bin_s` bins from what each receiver got, and where it came from.

    From the growth of the senders' bytes_acked (ss) when the run has ss samples; from iperf3's
    sender intervals otherwise (what the application wrote into its socket: it runs ahead of the
    link by up to the socket buffer, so it is named as such wherever it is shown). Tidy rows:
    flow, t_s (bin start), bytes, mbps, active (bin overlaps the flow's span)."""
    cols = ["flow", "t_s", "bytes", "mbps", "active"]
    ss, tp = tables.get("ss"), tables.get("throughput")
    if ss is None or ss.empty or "bytes_acked" not in ss or ss["bytes_acked"].isna().all():
        if tp is None or tp.empty:
            return pd.DataFrame(columns=cols), "none"
        return binned_throughput(tp, bin_s, t_end), "iperf3 sender intervals"
    if t_end is None:
        t_end = float(spans["t_end"].max()) if len(spans) else float(ss["t_s"].max())
    edges = derived.bin_edges(t_end, bin_s)
    sp = spans.set_index("flow")
    parts = []
    starts = dict(zip(spans["flow"].astype(int), spans["t_start"].astype(float), strict=True))
    for flow, b in derived.delivered_binned(ss, edges, starts).items():
        s, e = (sp.loc[flow, "t_start"], sp.loc[flow, "t_end"]) if flow in sp.index else (-np.inf, np.inf)
        active = (edges[1:] > s + 1e-9) & (edges[:-1] < e - 1e-9)
        parts.append(pd.DataFrame({"flow": flow, "t_s": edges[:-1], "bytes": b,
                                   "mbps": b * 8 / bin_s / 1e6, "active": active}))
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)), "ss bytes_acked"


def link_aggregate(link: Link, bq: pd.DataFrame, bin_s: float, t_end: float) -> pd.DataFrame:
    """What the bottleneck sent per bin: t_s (bin start), bytes, mbps and utilisation (of the
    link's rate over the bin). Ethernet frames, as the shaper counts them."""
    edges = derived.bin_edges(t_end, bin_s)
    b = derived.dequeued_binned(bq, edges)
    cap = np.array([derived.link_bytes_between(link, a, z) for a, z in pairwise(edges)])
    return pd.DataFrame({"t_s": edges[:-1], "bytes": b, "mbps": b * 8 / bin_s / 1e6,
                         "utilisation": np.divide(b, cap, out=np.full(len(cap), np.nan), where=cap > 0)})


def window_mean_mbps(binned: pd.DataFrame, t0: float, t1: float) -> pd.Series:
    """Mean throughput per flow over its active bins starting inside [t0, t1).

    A flow that starts late (staggered schedules) is averaged over the part of the window it was
    running, so the window measures how flows share the link while they compete.
    """
    w = binned[(binned["t_s"] >= t0 - 1e-9) & (binned["t_s"] < t1 - 1e-9) & binned["active"]]
    return w.groupby("flow")["mbps"].mean()


def steady_window(spans: pd.DataFrame, skip_s: float) -> tuple[float, float]:
    """Steady-state window [skip_s after time zero, end of the first flow to finish).

    If that is empty (a short or staggered run) the window runs to the last flow's end instead.
    """
    if spans.empty:
        return float("nan"), float("nan")
    t0 = float(skip_s)
    t1 = float(spans["t_end"].min())
    if t1 <= t0:
        t1 = float(spans["t_end"].max())
    if t1 <= t0:
        t0 = float(spans["t_start"].min())
    return t0, t1


def jain_series(binned: pd.DataFrame, window_s: float = DEFAULT_JAIN_WINDOW_S) -> pd.DataFrame:
    """Jain's index over a sliding window (trailing, `window_s` long) of the binned throughput.

    At each bin only flows active during that bin count. Returns t_s (window end), jain, n_flows.
    """
    if binned.empty:
        return pd.DataFrame(columns=["t_s", "jain", "n_flows"])
    bin_s = float(np.diff(np.unique(binned["t_s"]))[:1].min()) if binned["t_s"].nunique() > 1 else 1.0
    k = max(1, int(round(window_s / bin_s)))
    wide = binned.pivot(index="t_s", columns="flow", values="mbps").sort_index()
    act = binned.pivot(index="t_s", columns="flow", values="active").sort_index().astype(bool)
    # Mean over the flow's active bins within the window.
    num = wide.where(act, 0.0).rolling(k, min_periods=1).sum()
    cnt = act.astype(float).rolling(k, min_periods=1).sum()
    x = (num / cnt.replace(0.0, np.nan)).where(act)
    x_np = x.to_numpy(float)
    n = np.sum(~np.isnan(x_np), axis=1)
    s = np.nansum(x_np, axis=1)
    ss = np.nansum(x_np * x_np, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        j = np.where((n > 0) & (ss > 0), s * s / (n * ss), np.nan)
    return pd.DataFrame({"t_s": wide.index.to_numpy(float) + bin_s, "jain": j, "n_flows": n})


def shares(values: pd.Series) -> pd.Series:
    """Each entry's fraction of the sum (NaN when the sum is zero)."""
    tot = float(values.sum())
    return values / tot if tot > 0 else values * np.nan


def group_share_series(binned: pd.DataFrame, flow_cc: dict, bin_s: float = SHARE_BIN_S,
                       t0: float = 0.0, t1: float = float("inf")) -> pd.DataFrame:
    """Throughput share of each CC group per `bin_s` interval within [t0, t1).

    `binned` is from binned_throughput at a finer bin; it is re-summed into `bin_s` intervals.
    Returns tidy rows: t_s, cc, share. Intervals with no traffic at all are dropped.
    """
    if binned.empty:
        return pd.DataFrame(columns=["t_s", "cc", "share"])
    b = binned[(binned["t_s"] >= t0 - 1e-9) & (binned["t_s"] < t1 - 1e-9)].copy()
    b["cc"] = b["flow"].map(flow_cc)
    b["slot"] = np.floor(b["t_s"] / bin_s + 1e-9) * bin_s
    g = b.groupby(["slot", "cc"])["bytes"].sum().unstack("cc").fillna(0.0)
    tot = g.sum(axis=1)
    g = g[tot > 0].div(tot[tot > 0], axis=0)
    out = g.stack().rename("share").reset_index().rename(columns={"slot": "t_s"})
    return out


# ---------------------------------------------------------------------------------------------
# Link: utilisation, drops, queue
# ---------------------------------------------------------------------------------------------


def drop_stats(bq: pd.DataFrame) -> dict:
    """Drops and loss rate at the bottleneck over the run.

    loss_rate = dropped packets / (sent packets + dropped packets) over the sampled span.
    """
    if bq is None or bq.empty:
        return {"drops": float("nan"), "sent_pkts": float("nan"), "loss_rate": float("nan")}
    drops = derived.counter_growth(bq["drops"])
    sent = derived.counter_growth(bq["sent_pkts"])
    tot = drops + sent
    return {"drops": drops, "sent_pkts": sent, "loss_rate": drops / tot if tot > 0 else float("nan")}


def drops_series(bq: pd.DataFrame, bin_s: float) -> pd.DataFrame:
    """Bottleneck drops per `bin_s` bin: t_s (bin start), drops."""
    if bq is None or bq.empty:
        return pd.DataFrame(columns=["t_s", "drops"])
    inc = derived.counter_increments(bq["drops"].to_numpy())
    slot = np.floor(bq["t_s"].to_numpy(float) / bin_s + 1e-9) * bin_s
    return (pd.DataFrame({"t_s": slot, "drops": inc}).groupby("t_s", as_index=False)["drops"].sum())


def queue_delay_ms(backlog_bytes: Any, rate_mbps: Any) -> np.ndarray:
    """Queueing delay implied by a backlog drained at the link rate: backlog * 8 / rate (ms)."""
    return np.asarray(backlog_bytes, dtype=float) * 8 / (rate_mbps * 1e6) * 1e3


def queue_bdp(backlog_bytes: Any, bdp_bytes: float) -> np.ndarray:
    """Queue occupancy in multiples of the bandwidth-delay product."""
    return np.asarray(backlog_bytes, dtype=float) / float(bdp_bytes)


def srtt_queueing_delay(ss: pd.DataFrame) -> pd.DataFrame:
    """Per-sample queueing delay seen by each flow: srtt - min RTT (ms).

    min RTT is the flow's lowest min_rtt_ms (falling back to its lowest srtt) over the run, the
    best estimate of its propagation delay. Returns flow, t_s, qdelay_ms.
    """
    if ss is None or ss.empty:
        return pd.DataFrame(columns=["flow", "t_s", "qdelay_ms"])
    s = ss[["flow", "t_s", "srtt_ms"]].copy()
    base = ss.groupby("flow")["min_rtt_ms"].min() if "min_rtt_ms" in ss else pd.Series(dtype=float)
    base2 = ss.groupby("flow")["srtt_ms"].min()
    base = base.reindex(base2.index).fillna(base2)
    s["qdelay_ms"] = s["srtt_ms"] - s["flow"].map(base)
    return s[["flow", "t_s", "qdelay_ms"]]


# ---------------------------------------------------------------------------------------------
# Per-run summary
# ---------------------------------------------------------------------------------------------


def run_metrics(record: RunRecord, tables: dict[str, pd.DataFrame], *, bin_s: float | None = None,
                skip_s: float = DEFAULT_SKIP_S) -> RunMetrics:
    """All metrics of one run, step by step: the per-run row, one row per flow and per CC group,
    and the tidy time series the report plots. `bin_s` defaults to derived.default_bin_s (one RTT,
    at least 100 ms)."""
    rd = _RunData.of(record, tables, bin_s or derived.default_bin_s(record))
    out = RunMetrics(RunValues(bin_s=rd.bin_s))
    totals = _flow_throughput(rd, skip_s, out)
    _flow_tcp_state(rd, totals, out)
    _run_totals(rd, totals, out)
    _retransmissions(rd, out)
    _bottleneck(rd, out)
    _cc_groups(rd, totals, out)
    out.flows = totals.to_dict("records")
    return out


class _RunData:
    """What every step needs: the record and its link, tables, the flows' ccs, RTTs and spans, and the bin."""

    record: RunRecord
    link: Link  # an empty one when the record has none (a run that stopped early)
    tables: dict
    bin_s: float
    tp: pd.DataFrame
    flow_cc: dict[int, Any]
    flow_rtt: dict[int, Any]
    spans: pd.DataFrame
    t_first: float
    t_last: float
    binned: pd.DataFrame  # set by _flow_throughput, for the later steps
    steady: pd.Series

    @classmethod
    def of(cls, record: RunRecord, tables: dict, bin_s: float) -> _RunData:
        rd = cls()
        rd.record, rd.tables, rd.bin_s = record, tables, float(bin_s)
        rd.link = record.link or Link()
        tp = tables.get("throughput")
        rd.tp = tp if tp is not None and not tp.empty else pd.DataFrame(
            columns=["flow", "t_s", "interval_s", "bytes", "retransmits"])
        planned = record.flows or []
        # a flow without its number is the i-th; a null number is none (refused)
        rd.flow_cc = {int(f.given("flow", i)): f.cc for i, f in enumerate(planned)}
        rd.flow_rtt = {int(f.given("flow", i)): f.rtt_ms for i, f in enumerate(planned)}
        flows_t = tables.get("flows")
        if flows_t is not None and not flows_t.empty:
            for r in flows_t.itertuples():
                rd.flow_cc.setdefault(int(r.flow), getattr(r, "cc", None))
                rd.flow_rtt.setdefault(int(r.flow), getattr(r, "rtt_ms", None))
        rd.spans = derived.flow_spans(planned, flows_t, rd.tp)
        if len(rd.tp):  # flows with intervals only; a flow that never ran has no span to speak of
            rd.spans = rd.spans[rd.spans["flow"].isin(rd.tp["flow"].unique())].reset_index(drop=True)
        rd.t_first = float(rd.spans["t_start"].min()) if len(rd.spans) else float("nan")
        rd.t_last = float(rd.spans["t_end"].max()) if len(rd.spans) else float("nan")
        return rd


def _flow_throughput(rd: _RunData, skip_s: float, out: RunMetrics) -> pd.DataFrame:
    """Per-flow throughput over time (what the receivers got), totals, steady-state means, shares
    and 003 Table 1's 1 s max/min/avg."""
    run, series = out.run, out.series
    binned, source = received_throughput(rd.tables, rd.bin_s, rd.spans)
    series["binned"], run.throughput_source = binned, source
    rd.binned = binned
    s0, s1 = steady_window(rd.spans, skip_s)
    run.steady_t0_s, run.steady_t1_s = s0, s1
    rd.steady = window_mean_mbps(binned, s0, s1) if len(binned) else pd.Series(dtype=float)
    totals = flow_totals(rd.tp, rd.tables.get("flows"), rd.spans)
    totals["cc"] = totals["flow"].map(rd.flow_cc)
    totals["rtt_ms"] = totals["flow"].map(rd.flow_rtt)
    totals["steady_mbps"] = totals["flow"].map(rd.steady)
    totals["share"] = shares(totals["bytes"])
    totals["steady_share"] = shares(totals["steady_mbps"].fillna(0.0))
    # 003 Table 1: max/min/avg over whole 1 s intervals inside the active period (edges read low).
    b1, _ = received_throughput(rd.tables, TABLE_BIN_S, rd.spans)
    full = b1[b1["active"].astype(bool)] if len(b1) else b1
    if len(full):
        sp = rd.spans.set_index("flow")
        full = full[(full["t_s"] >= full["flow"].map(sp["t_start"]) - 1e-9)
                    & (full["t_s"] + TABLE_BIN_S <= full["flow"].map(sp["t_end"]) + 1e-9)]
    agg = full.groupby("flow")["mbps"].agg(["max", "min", "mean"]) if len(full) else None
    for k, name in (("max", "max_mbps_1s"), ("min", "min_mbps_1s"), ("mean", "avg_mbps_1s")):
        totals[name] = totals["flow"].map(agg[k]) if agg is not None else np.nan
    totals["startup_exit_s"] = totals["flow"].map(startup_exit_s(rd.tables.get("cc_state"), rd.spans))
    return totals


def _flow_tcp_state(rd: _RunData, totals: pd.DataFrame, out: RunMetrics) -> None:
    """Per flow from ss: mean cwnd, srtt, min RTT and queueing delay (srtt - min RTT)."""
    ss = rd.tables.get("ss")
    if ss is None or ss.empty:
        for c in ("mean_cwnd_pkts", "mean_srtt_ms", "min_rtt_ms", "mean_qdelay_ms"):
            totals[c] = np.nan
        out.run.mean_srtt_qdelay_ms = float("nan")
        return
    qd_flow = srtt_queueing_delay(ss)
    out.series["qdelay_srtt"] = qd_flow
    g = ss.groupby("flow")
    totals["mean_cwnd_pkts"] = totals["flow"].map(g["cwnd"].mean())
    totals["mean_srtt_ms"] = totals["flow"].map(g["srtt_ms"].mean())
    totals["min_rtt_ms"] = totals["flow"].map(g["min_rtt_ms"].min())
    totals["mean_qdelay_ms"] = totals["flow"].map(qd_flow.groupby("flow")["qdelay_ms"].mean())
    out.run.mean_srtt_qdelay_ms = float(qd_flow["qdelay_ms"].mean()) if len(qd_flow) else float("nan")


def _run_totals(rd: _RunData, totals: pd.DataFrame, out: RunMetrics) -> None:
    """Run level: bytes, duration, mean throughput, fairness, how full the link was, retransmits."""
    run = out.run
    total_bytes = float(totals["bytes"].sum()) if len(totals) else float("nan")
    duration = rd.t_last - rd.t_first
    run.flows = int(len(totals))
    run.bytes = total_bytes
    run.duration_s = duration
    run.throughput_mbps = total_bytes * 8 / duration / 1e6 if duration > 0 else float("nan")
    run.jain = jain_index(totals["mean_mbps"]) if len(totals) else float("nan")
    run.jain_steady = jain_index(rd.steady.to_numpy()) if len(rd.steady) else float("nan")
    run.utilisation = derived.link_fullness(rd.record, rd.tables)["fraction"]
    run.retransmits = float(totals["retransmits"].sum()) if len(totals) else float("nan")
    run.retransmits_per_mb = run.retransmits / (total_bytes / 1e6) if total_bytes else float("nan")
    run.short_rtt_flow_share = short_rtt_flow_share(totals)
    out.series["jain"] = jain_series(rd.binned)


def short_rtt_flow(rtts: pd.Series) -> Any:
    """The index of the flow with the smallest configured RTT (001 Fig. 7); None unless there are
    two flows or more and their RTTs differ."""
    rtts = pd.to_numeric(rtts, errors="coerce")
    return rtts.idxmin() if len(rtts) >= 2 and rtts.min() < rtts.max() else None


def short_rtt_flow_share(totals: pd.DataFrame) -> float:
    """The steady share of the short-RTT flow; NaN unless the flows' RTTs differ."""
    flow = short_rtt_flow(totals.get("rtt_ms", pd.Series(dtype=float)))
    return float("nan") if flow is None else float(totals.loc[flow, "steady_share"])


def _retransmissions(rd: _RunData, out: RunMetrics) -> None:
    """Retransmissions over time (iperf3 sender intervals), in the run's bins."""
    if len(rd.tp):
        r = rd.tp[["t_s", "retransmits", "flow"]].copy()
        r["t_s"] = np.floor((r["t_s"] - 1e-9) / rd.bin_s) * rd.bin_s
        out.series["retrans"] = r.groupby(["flow", "t_s"], as_index=False)["retransmits"].sum()


def _bottleneck(rd: _RunData, out: RunMetrics) -> None:
    """At the bottleneck: drops and loss rate (whole recording), what it sent per bin (the
    aggregate), and its queue while the flows ran."""
    run, series = out.run, out.series
    bq = derived.bottleneck_samples(rd.tables.get("qdisc"))
    if bq.empty or rd.t_last != rd.t_last:
        return
    ds = drop_stats(bq)
    run.bottleneck_drops, run.bottleneck_loss_rate = ds["drops"], ds["loss_rate"]
    series["drops"] = drops_series(bq, rd.bin_s)
    series["aggregate"] = link_aggregate(rd.link, bq, rd.bin_s, rd.t_last)
    # The queue while the flows ran (samplers start before time zero and stop after the flows).
    q = bq[((bq["t_s"] >= min(0.0, rd.t_first) - 1e-9) & (bq["t_s"] <= rd.t_last + RUN_TAIL_S)).to_numpy()]
    if q.empty:
        return
    rate = derived.link_rate_mbps_at(rd.link, q["t_s"].to_numpy(float))
    qdel = queue_delay_ms(q["backlog_bytes"], rate)
    qbdp = queue_bdp(q["backlog_bytes"], derived.bdp_bytes(rd.link))
    series["queue"] = pd.DataFrame({"t_s": q["t_s"].to_numpy(float),
                                    "backlog_bytes": q["backlog_bytes"].to_numpy(float),
                                    "qdelay_ms": qdel, "queue_bdp": qbdp})
    if np.isfinite(qdel).any():
        run.mean_queue_delay_ms = float(np.nanmean(qdel))
        run.p95_queue_delay_ms = float(np.nanpercentile(qdel, 95))
    if np.isfinite(qbdp).any():
        run.mean_queue_bdp = float(np.nanmean(qbdp))
        run.max_queue_bdp = float(np.nanmax(qbdp))


def _cc_groups(rd: _RunData, totals: pd.DataFrame, out: RunMetrics) -> None:
    """Per CC group: share of bytes, retransmissions, percentile band of the 0.5 s shares."""
    if not len(totals):
        return
    s0, s1 = out.run.steady_t0_s, out.run.steady_t1_s
    total_bytes = out.run.bytes
    gshare = group_share_series(rd.binned, rd.flow_cc, SHARE_BIN_S, s0, s1)
    out.series["group_share"] = group_share_series(rd.binned, rd.flow_cc, SHARE_BIN_S)
    for cc, g in totals.groupby("cc", sort=False):
        gs = gshare[gshare["cc"] == cc]["share"] if len(gshare) else pd.Series(dtype=float)
        out.groups.append(CcValues(
            cc=cc, flows=int(len(g)), bytes=float(g["bytes"].sum()),
            share=float(g["bytes"].sum()) / total_bytes if total_bytes else float("nan"),
            steady_share=float(g["steady_share"].sum()),
            steady_share_p25=float(gs.quantile(0.25)) if len(gs) else float("nan"),
            steady_share_p75=float(gs.quantile(0.75)) if len(gs) else float("nan"),
            retransmits=float(g["retransmits"].sum()),
            retransmits_per_mb=(float(g["retransmits"].sum()) / (float(g["bytes"].sum()) / 1e6)
                                if float(g["bytes"].sum()) > 0 else float("nan")),
            mean_mbps=float(g["mean_mbps"].mean()),
            startup_exit_s=float(g["startup_exit_s"].mean()),  # NaN without a mode trace
            # srtt - min RTT averaged over cc's flows (NaN without ss): the claim term qdelay(cc)
            mean_qdelay_ms=float(g["mean_qdelay_ms"].mean()) if "mean_qdelay_ms" in g else float("nan"),
        ))


def goodput_mbps(run: Run) -> float:
    """A one-flow run's goodput: the receiver's byte total over the flow's active time (flow_totals), as
    `cctest validate` compares it with a testbed's iperf3 summary line; NaN when it cannot be read."""
    if run.recorded is not None:  # a compact record keeps a one-flow run's goodput as read here
        value = run.recorded.goodput_mbps
        return float(value) if value is not None else float("nan")
    throughput = run.tables.get("throughput")
    if throughput is None or throughput.empty:
        return float("nan")
    totals = flow_totals(throughput, run.tables.get("flows"))
    value = float(totals["mean_mbps"].iloc[0]) if len(totals) == 1 else float("nan")
    return value if math.isfinite(value) and value >= 0 else float("nan")
