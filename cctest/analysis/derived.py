"""One definition per derived quantity, shared by the health checks, the metrics and the report.

Each function answers one question about a run (from its record and the tidy tables) so that
checks.json, the report's overview and its figures can never give two answers to it:

- the link rate at a time, and the bytes the link can deliver over a span (`link_rate_mbps_at`,
  `link_bytes_between`): the one place a rate schedule and outages (`outage_spans`) plug in;
- the bandwidth-delay product (`bdp_bytes`) and the throughput bin (`default_bin_s`);
- growth of a cumulative counter across resets (`counter_increments`, `counter_growth`);
- which qdisc is the bottleneck (`bottleneck_samples`) and how many packets it dropped
  (`bottleneck_drops`);
- each flow's active span and the time at least one flow was active (`flow_spans`,
  `union_length`);
- how full the link was (`link_fullness`);
- bytes per time bin of a sampled cumulative counter (`binned_counter`): what each receiver got
  (`delivered_binned`, from the senders' bytes_acked) and what the bottleneck sent
  (`dequeued_binned`).
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..model.aqm import AQMS
from ..model.record import Flow, Link, RunRecord
from ..model.wire import ETHERNET_HEADER_BYTES, IP_TCP_TIMESTAMP_HEADER_BYTES, MTU_BYTES

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy.typing as npt

MIN_BIN_S = 0.1  # throughput bins are never shorter than the samplers' default 100 ms interval

# ---------------------------------------------------------------------------------------------
# Link


def link_rate_mbps_at(link: Link, t: npt.ArrayLike) -> float | np.ndarray:
    """The bottleneck's configured rate (Mbit/s) at run time(s) `t`.

    `link.rate_schedule` (a list of {at_s, rate_mbps}) changes it from `at_s` on; without one the
    rate is `link.rate_mbps` throughout. NaN when the run records no rate.
    """
    base = float(link.rate_mbps or math.nan)
    steps = sorted((_required(s.at_s), _required(s.rate_mbps)) for s in link.rate_schedule or [])
    t_arr = np.asarray(t, dtype=float)
    rate = np.full(t_arr.shape, base)
    for at, r in steps:
        rate = np.where(t_arr >= at, r, rate)
    return float(rate) if rate.ndim == 0 else rate


def _required(value: float | None) -> float:
    """A rate step's or an outage's time, rate or duration: one recorded without it cannot be placed."""
    if value is None:
        raise TypeError("a link's rate step or outage without its time, rate or duration")
    return float(value)


def outage_spans(link: Link) -> list[tuple[float, float]]:
    """(start, end) of each planned `link.outages` entry: the link delivered nothing then."""
    return [(_required(o.at_s), _required(o.at_s) + _required(o.duration_s)) for o in link.outages or []]


def link_bytes_between(link: Link, t0: float, t1: float) -> float:
    """Bytes (as the shaper counts them: Ethernet frames) the link can deliver in [t0, t1]: at its
    rate at each time, nothing during an outage."""
    if not t1 > t0:
        return 0.0
    outages = outage_spans(link)
    edges = [_required(s.at_s) for s in link.rate_schedule or []] + [t for span in outages for t in span]
    cuts = sorted({t0, t1, *(t for t in edges if t0 < t < t1)})
    return float(sum(link_rate_mbps_at(link, a) * 1e6 / 8 * (b - a) for a, b in pairwise(cuts)
                     if not any(start <= a and b <= end for start, end in outages)))


def payload_fraction(mtu: int) -> float:
    """TCP payload per byte the shaper counts: MSS (MTU - IP, TCP and timestamp headers) / frame."""
    return (mtu - IP_TCP_TIMESTAMP_HEADER_BYTES) / (mtu + ETHERNET_HEADER_BYTES)


def link_mtu(link: Link) -> int:
    """The link's MTU; MTU_BYTES for a record from before it was recorded (a null one is no MTU: refused)."""
    return int(link.given("mtu", MTU_BYTES))


def frame_bytes(link: Link) -> int:
    """One MTU-sized packet as the shaper counts it."""
    return link_mtu(link) + ETHERNET_HEADER_BYTES


def bdp_bytes(link: Link) -> float:
    """The bandwidth-delay product the scenario sized its buffer with (link.bdp_bytes), else
    rate x RTT."""
    if link.bdp_bytes:
        return float(link.bdp_bytes)
    rtt = link.bdp_rtt_ms or link.rtt_ms
    rate = link.rate_mbps
    return float(rate) * 1e6 / 8 * float(rtt) / 1e3 if rate and rtt else math.nan


def default_bin_s(record: RunRecord) -> float:
    """Throughput bin: one RTT of the slowest flow (a flow's rate means little over less than one
    round trip), never below MIN_BIN_S (the samplers' interval)."""
    rtts = [f.rtt_ms for f in record.flows or []] + [(record.link or Link()).rtt_ms]
    positive = [float(r) for r in rtts if r is not None and r > 0]
    return max(MIN_BIN_S, max(positive) / 1e3 if positive else 0.0)


# ---------------------------------------------------------------------------------------------
# Counters and the bottleneck qdisc


def counter_increments(values: npt.ArrayLike) -> np.ndarray:
    """Per-sample increments of a cumulative counter: the first sample adds 0; a counter that goes
    backwards (qdisc re-created) restarts from 0, so its new value is its growth since; NaN adds 0."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return v
    v = pd.Series(v).ffill().to_numpy()
    d = np.diff(v, prepend=v[0])
    reset = d < 0
    d[reset] = v[reset]
    return np.nan_to_num(d)


def counter_growth(values: npt.ArrayLike) -> float:
    """How much a cumulative counter grew over its samples, across resets."""
    return float(counter_increments(values).sum())


# Queueing disciplines that hold the packets themselves (the buffer), as opposed to shapers (tbf)
# whose counters aggregate their children's: the kernel's plain queues and every AQM cctest runs.
# netem is neither: as cctest's fifo bottleneck it is the root and holds the queue itself.
BUFFER_KINDS = ("bfifo", "pfifo", "pfifo_fast", "fq", "sfq") + tuple(kind for kind in AQMS if kind != "fifo")


def bottleneck_samples(qdisc: pd.DataFrame | None) -> pd.DataFrame:
    """Samples of the one qdisc that is the bottleneck buffer, by time.

    Among qdiscs with role "bottleneck" take the buffer-holding leaf when there is one (a shaper
    with a leaf), else the root, else the first; never mix two qdiscs' cumulative counters.
    """
    if qdisc is None or qdisc.empty or "role" not in qdisc:
        return pd.DataFrame(columns=list(qdisc.columns) if qdisc is not None else [])
    b = qdisc[qdisc["role"] == "bottleneck"]
    if b.empty:
        return b
    keys = [c for c in ("iface", "handle") if c in b]
    groups = [g for _, g in b.groupby(keys, sort=False, dropna=False)] if keys else [b]

    def rank(ig: tuple[int, pd.DataFrame]) -> tuple[int, int]:
        i, g = ig
        kind = str(g["kind"].iloc[0]) if "kind" in g else ""
        parent = str(g["parent"].iloc[0]) if "parent" in g else ""
        return (0 if kind in BUFFER_KINDS else 1 if parent == "root" else 2), i

    best = min(enumerate(groups), key=rank)[1]
    return best.sort_values("t_s").reset_index(drop=True)


def bottleneck_drops(qdisc: pd.DataFrame | None) -> float:
    """Packets the bottleneck dropped over the whole recording (NaN without bottleneck samples).

    The whole recording, not only while flows ran: the samplers start before time zero and stop
    after the flows, and every drop in that time is one of this run's packets."""
    bq = bottleneck_samples(qdisc)
    return counter_growth(bq["drops"]) if len(bq) else math.nan


# ---------------------------------------------------------------------------------------------
# Flows


def flow_spans(planned: list[Flow], flows: pd.DataFrame | None, throughput: pd.DataFrame | None) -> pd.DataFrame:
    """Per flow, when it was active (run seconds): columns flow, t_start, t_end, active_s.

    From the best source available: 1. flows.launched_s (else start_s) + flows.elapsed_s
    (iperf3's own measured test length); 2. the flow's iperf3 intervals (each ends at t_s and lasts
    interval_s); 3. the `planned` flows (the record's): launched_s (else start_s) + the configured
    duration_s.
    """
    spans: dict[int, tuple[float, float]] = {}
    if flows is not None and not flows.empty and {"launched_s", "elapsed_s"} <= set(flows.columns):
        for r in flows.itertuples():
            start = r.launched_s if pd.notna(r.launched_s) else getattr(r, "start_s", None)
            if start is not None and pd.notna(start) and pd.notna(r.elapsed_s):
                spans[int(r.flow)] = (float(start), float(start) + float(r.elapsed_s))
    if throughput is not None and not throughput.empty:
        for i, g in throughput.groupby("flow"):
            spans.setdefault(int(i), (float((g["t_s"] - g["interval_s"]).min()), float(g["t_s"].max())))
    for f in planned:
        start = f.launched_s if f.launched_s is not None else f.start_s
        if f.flow is not None and start is not None and f.duration_s is not None:
            spans.setdefault(f.flow, (float(start), float(start) + float(f.duration_s)))
    rows = sorted((fl, s, e) for fl, (s, e) in spans.items())
    out = pd.DataFrame(rows, columns=["flow", "t_start", "t_end"])
    out["active_s"] = out["t_end"] - out["t_start"]
    return out


def union_length(spans: Iterable[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end] intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                assert cur_s is not None  # set together with cur_e
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        assert cur_s is not None  # set together with cur_e
        total += cur_e - cur_s
    return total


def acked_within(ss: pd.DataFrame | None, flow: int, start: float, end: float) -> float | None:
    """Bytes the flow's sender saw acknowledged between start and end (ss, interpolated), or None.

    Not the receiver's total: when iperf3 stops, its socket still holds data it wrote, and the
    receiver's total includes that drain, which happens after the active span."""
    if ss is None or ss.empty or not {"flow", "t_s", "bytes_acked"} <= set(ss.columns):
        return None
    g = ss[ss["flow"] == flow].dropna(subset=["bytes_acked"]).sort_values("t_s")
    if len(g) < 2:
        return None
    t, acked = g["t_s"].to_numpy(float), g["bytes_acked"].to_numpy(float)
    return float(np.interp(end, t, acked) - np.interp(start, t, acked))


def link_fullness(record: RunRecord, tables: dict) -> dict:
    """How full the link was: payload delivered while at least one flow was active, as a fraction
    of the payload the link can carry in that time.

    Delivered: per flow, the bytes its sender saw acknowledged over its span (ss); the receiver's
    iperf3 total when there is no ss (it also counts the drain after the span); the sender's total
    as the last resort. Capacity: the link's bytes (Ethernet frames) over the union of the spans
    times the payload share of a full frame. Returns delivered_bytes, span_s, capacity_bytes,
    fraction and notes (what had to fall back)."""
    flows, ss = tables.get("flows"), tables.get("ss")
    link = record.link or Link()
    spans = flow_spans(record.flows or [], flows, tables.get("throughput"))
    by_flow = {int(r.flow): (r.t_start, r.t_end) for r in spans.itertuples()}
    delivered, notes = 0.0, []
    for row in (flows.itertuples() if flows is not None else []):
        span = by_flow.get(int(row.flow))
        acked = acked_within(ss, int(row.flow), *span) if span else None
        if acked is not None:
            delivered += acked
            continue
        rx = row.bytes_received
        if pd.isna(rx):
            if pd.isna(row.bytes_sent):
                notes.append(f"flow {row.flow}: no iperf3 totals")
                continue
            notes.append(f"flow {row.flow}: receiver total missing, sender total used")
            rx = row.bytes_sent
        delivered += float(rx)
    intervals = list(by_flow.values())
    span_s = union_length(intervals)
    capacity = sum(link_bytes_between(link, s, e) for s, e in _merged(intervals)) * payload_fraction(link_mtu(link))
    fraction = delivered / capacity if capacity > 0 and delivered > 0 else math.nan
    return {"delivered_bytes": delivered, "span_s": span_s, "capacity_bytes": capacity,
            "fraction": fraction, "notes": notes}


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


# ---------------------------------------------------------------------------------------------
# Counters over time


def bin_edges(t_end: float, bin_s: float) -> np.ndarray:
    """Bin edges 0, bin_s, ... covering [0, t_end)."""
    n = max(1, int(math.ceil(t_end / bin_s - 1e-9)))
    return np.round(np.arange(n + 1) * bin_s, 9)


def binned_counter(t: npt.ArrayLike, cum: npt.ArrayLike, edges: np.ndarray) -> np.ndarray:
    """Growth of a sampled cumulative counter within each bin.

    The counter is read only at its sample times; between two samples it is taken to grow evenly
    (linear interpolation), so bins conserve the counter's growth exactly and plot the samples'
    true times. Before the first sample and after the last it does not grow."""
    t = np.asarray(t, dtype=float)
    c = np.asarray(cum, dtype=float)
    if t.size == 0:
        return np.zeros(len(edges) - 1)
    t = np.maximum.accumulate(t)
    return np.diff(np.interp(edges, t, c, left=c[0], right=c[-1]))


def delivered_binned(ss: pd.DataFrame, edges: np.ndarray,
                     starts: dict[int, float] | None = None) -> dict[int, np.ndarray]:
    """Per flow, payload bytes the receiver got in order within each bin: the growth of the
    sender's bytes_acked (ss), which is 0 when the flow starts (`starts`: flow -> run seconds).
    A retransmission that fills a hole acknowledges everything the receiver held behind it at
    once, so one flow's bin can exceed its share of the link right after a loss."""
    out = {}
    for flow, g in ss.dropna(subset=["bytes_acked"]).groupby("flow", sort=True):
        g = g.sort_values("t_s")
        t = g["t_s"].to_numpy(float)
        cum = np.cumsum(counter_increments(g["bytes_acked"].to_numpy())) + float(g["bytes_acked"].iloc[0])
        start = (starts or {}).get(int(flow))
        if start is not None and start < t[0]:
            t, cum = np.concatenate([[start], t]), np.concatenate([[0.0], cum])
        out[int(flow)] = binned_counter(t, cum, edges)
    return out


def dequeued_binned(bq: pd.DataFrame, edges: np.ndarray) -> np.ndarray:
    """Bytes (Ethernet frames) the bottleneck qdisc sent within each bin."""
    cum = np.cumsum(counter_increments(bq["sent_bytes"].to_numpy()))
    return binned_counter(bq["t_s"].to_numpy(), cum, edges)
