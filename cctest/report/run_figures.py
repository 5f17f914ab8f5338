"""The figures of one run, in page order: `run_figures` is their table of contents, each step a
function of the run's view that returns its figures (none when the run lacks the data).

Every time axis spans the flows' schedule; metrics come from cctest.analysis.metrics (all samples), the
traces are decimated for display (figure.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..analysis import derived, metrics
from ..analysis.defaults import DEFAULT_BIN_MS, DEFAULT_JAIN_WINDOW_S, DEFAULT_MAX_POINTS
from ..model.metric_table import RunMetrics
from ..model.record import Flow, Link, RunRecord
from .colors import CCColors, flow_ccs
from .figure import DFig, Fig, decimate, layout, lines
from .state_figure import cc_state_figure

if TYPE_CHECKING:
    from ..analysis.load import Run


def _number(flow: Flow, i: int) -> int:
    """A flow's number, its place in the list where the record has none."""
    return flow.flow if flow.flow is not None else i


def flow_names(record: RunRecord) -> dict[int, str]:
    """flow -> its legend name: `flow 1 · cubic · 40 ms`."""
    out = {}
    for i, f in enumerate(record.flows or []):
        fl, rtt = _number(f, i), f.rtt_ms
        out[fl] = f"flow {fl} · {f.cc}" + (f" · {rtt:g} ms" if rtt is not None else "")
    return out


def flow_colors(record: RunRecord, colors: CCColors) -> dict[int, str]:
    """flow -> its cc's colour, the k-th of n flows of one cc in the k-th of n shades of it."""
    ccs = flow_ccs(record)
    out = {}
    for i, f in enumerate(record.flows or []):
        cc = str(f.cc)
        same = [j for j, c in enumerate(ccs) if c == cc]
        out[_number(f, i)] = colors.shade(cc, same.index(i), len(same))
    return out


def run_figures(run: Run, res: RunMetrics, *, max_points: int = DEFAULT_MAX_POINTS,
                jain_window_s: float = DEFAULT_JAIN_WINDOW_S, colors: CCColors | None = None) -> list[Fig]:
    """The figures of one run, in page order; each step returns its figures (none when its data
    is missing). `colors`: the page's cc colours (default: this run's own). Every time axis spans the
    flows' schedule, from the first flow's start (samplers that started earlier are cut off)."""
    v = _RunView(run, res, max_points, jain_window_s, colors or CCColors(flow_ccs(run.record)))
    figs = [f for step in (_throughput_fig, _jain_fig, _group_share_fig, _retrans_drops_fig,
                           _utilisation_fig, _qdelay_fig, _queue_fig, _cwnd_fig, _rtprop_fig,
                           _cc_state_fig)
            for f in step(v)]
    if v.time_range:
        for f in figs:
            f.fig.update_xaxes(range=list(v.time_range))
    return figs


def schedule_range(record: RunRecord) -> tuple[float, float] | None:
    """(first flow's start, last flow's planned end) in seconds, or None without a flow schedule."""
    flows = record.flows or []
    starts = [float(f.start_s or 0) for f in flows]
    ends = [float(f.start_s or 0) + float(f.duration_s) for f in flows if f.duration_s is not None]
    if not flows:
        return None
    end = max(ends) if ends else float(record.duration_s or 0)
    return (min(starts), end) if end > min(starts) else None


class _RunView:
    """What the figure steps share: the run, its metrics, flow names, the bin and steady window."""

    def __init__(self, run: Run, res: RunMetrics, max_points: int, jain_window_s: float, colors: CCColors) -> None:
        self.run, self.res = run, res
        self.colors = colors
        self.record: RunRecord = run.record
        self.flow_colors = flow_colors(self.record, colors)
        self.time_range = schedule_range(self.record)
        self.link = self.record.link or Link()
        self.names = flow_names(self.record)
        self.s, self.r = res.series, res.run
        self.max_points, self.jain_window_s = max_points, jain_window_s
        self.bin_s = float(self.r.bin_s or DEFAULT_BIN_MS / 1000)
        self.t0, self.t1 = self.r.steady_t0_s, self.r.steady_t1_s

    def name(self, fl: int) -> str:
        return self.names.get(fl, f"flow {fl}")

    def color(self, fl: int) -> str:
        return self.flow_colors.get(int(fl), "#777")

    def steady_band(self, fig: DFig) -> None:
        t0, t1 = self.t0, self.t1
        if pd.notna(t0) and pd.notna(t1) and t1 > t0:
            fig.add_vrect(x0=t0, x1=t1, fillcolor="#888", opacity=0.07, line_width=0)

    def outage_bands(self, fig: DFig) -> None:
        """Each link.outages span, when the link delivered nothing."""
        for t0, t1 in derived.outage_spans(self.link):
            fig.add_vrect(x0=t0, x1=t1, fillcolor="#d62728", opacity=0.12, line_width=0, annotation_text="outage")

    def link_rate_line(self, fig: DFig, scale: float = 1.0, unit: str = "Mbit/s") -> None:
        """The link's rate: a line, or a step trace where link.rate_schedule changes it mid-run."""
        rate = self.link.rate_mbps
        if not rate:
            return
        steps = sorted(float(s.at_s) for s in self.link.rate_schedule or [] if s.at_s is not None)
        if not steps:
            fig.add_hline(y=rate * scale, line=dict(color="#999", dash="dash", width=1),
                          annotation_text=f"link {rate:g} Mbit/s", annotation_position="top left")
            return
        ends = [float(f.start_s or 0) + float(f.duration_s or 0) for f in self.record.flows or []]
        end = max([steps[-1] + 1.0, *ends])  # the last flow's planned end
        x = np.array([0.0, *steps, end])
        y = derived.link_rate_mbps_at(self.link, x) * scale
        fig.add_trace(dict(type="scatter", x=x, y=y, mode="lines", line=dict(color="#999", dash="dash", width=1,
                                                                             shape="hv"),
                           name="link rate (schedule)", hoverinfo="x+y"))


def _throughput_fig(v: _RunView) -> list[Fig]:
    binned, ag = v.s.get("binned"), v.s.get("aggregate")
    if binned is None or not len(binned):
        return []
    tr = []
    for fl, g in binned.groupby("flow"):
        g = g[g["active"].astype(bool)]
        tr.append(dict(x=g["t_s"].to_numpy() + v.bin_s, y=g["mbps"].to_numpy(), name=v.name(fl),
                       color=v.color(fl)))
    if ag is not None and len(ag):
        tr.append(dict(x=ag["t_s"].to_numpy() + v.bin_s, y=ag["mbps"].to_numpy(),
                       name="aggregate (bottleneck sent)", color="#444", dash="dot", width=1))
    fig = DFig(lines(tr, v.max_points))
    v.link_rate_line(fig)
    v.steady_band(fig)
    source = v.r.throughput_source
    per_flow = ("what each receiver got in order (growth of the sender's bytes_acked, ss); right after "
                "a loss a flow's bin can exceed its share: the retransmission releases what the receiver "
                "held" if source == "ss bytes_acked" else
                "iperf3 sender intervals (what the application wrote; no ss samples in this run: it runs "
                "ahead of the link by up to the socket buffer)")
    agg = ("; aggregate: bytes (frames) the bottleneck qdisc sent, from" + _bottleneck_sampling(v)
           if ag is not None and len(ag) else "; no bottleneck samples, so no aggregate.")
    v.outage_bands(fig)
    return [Fig("Throughput per flow", layout(fig, "Mbit/s"),
                f"{v.bin_s * 1000:g} ms bins. Per flow: {per_flow}{agg} Shaded: steady-state window "
                f"{v.t0:.1f}–{v.t1:.1f} s.", "throughput")]


def _jain_fig(v: _RunView) -> list[Fig]:
    js, r = v.s.get("jain"), v.r
    if js is None or not len(js) or len(v.names) <= 1 or v.s.get("binned") is None:
        return []
    fig = DFig(lines([dict(x=js["t_s"].to_numpy(), y=js["jain"].to_numpy(),
                           name=f"Jain ({v.jain_window_s:g} s window)", color="#333")], v.max_points))
    fig.add_hline(y=r.jain, line=dict(color="#666", dash="dash", width=1),
                  annotation_text=f"whole run {r.jain:.3f}", annotation_position="bottom left")
    if pd.notna(r.jain_steady):
        fig.add_hline(y=r.jain_steady, line=dict(color="#222", dash="dot", width=1),
                      annotation_text=f"steady {r.jain_steady:.3f}", annotation_position="bottom right")
    v.steady_band(fig)
    fig.update_yaxes(range=[0, 1.02])
    v.outage_bands(fig)
    return [Fig("Jain's fairness index", layout(fig, "J"),
                "Sliding window over the flows active in it; 1 = equal shares, 1/n = one flow takes all.", "jain")]


def _group_share_fig(v: _RunView) -> list[Fig]:
    gs = v.s.get("group_share")
    ccs = {f.cc for f in v.record.flows or []}
    if gs is None or not len(gs) or len(ccs) <= 1:
        return []
    fig = DFig()
    for cc, g in gs.groupby("cc", sort=False):
        x, y = decimate(g["t_s"].to_numpy() + metrics.SHARE_BIN_S, g["share"].to_numpy() * 100, v.max_points)
        fig.add_trace(dict(type="scatter", x=x.astype(np.float32), y=y.astype(np.float32),
                           name=str(cc), mode="lines", stackgroup="share",
                           line=dict(width=0.5, color=v.colors.of(cc)), fillcolor=v.colors.of(cc)))
    v.steady_band(fig)
    fig.update_yaxes(range=[0, 100])
    shares = ", ".join(f"{g.cc} {100 * g.share:.1f} %" for g in v.res.groups)
    v.outage_bands(fig)
    return [Fig("Throughput share per congestion control", layout(fig, "% of delivered bytes"),
                f"{metrics.SHARE_BIN_S:g} s intervals. Whole run: {shares}.", "group_share")]


def _retrans_drops_fig(v: _RunView) -> list[Fig]:
    rt, dr, r = v.s.get("retrans"), v.s.get("drops"), v.r
    if (rt is None or not len(rt)) and (dr is None or not len(dr)):
        return []
    fig = DFig(rows=2, vertical_spacing=0.08, row_heights=[0.55, 0.45])
    if rt is not None and len(rt):
        for fl, g in rt.groupby("flow"):
            for t in lines([dict(x=g["t_s"].to_numpy(), y=g["retransmits"].to_numpy(), name=v.name(fl),
                                 color=v.color(fl))], v.max_points):
                fig.add_trace(t, row=1, col=1)
    if dr is not None and len(dr):
        x, y = decimate(dr["t_s"].to_numpy(), dr["drops"].to_numpy(), v.max_points)
        fig.add_trace(dict(type="bar", x=x.astype(np.float32), y=y.astype(np.float32),
                           name="bottleneck drops", marker=dict(color="#555")), row=2, col=1)
    fig.update_yaxes(title_text="retrans / bin", row=1, col=1)
    fig.update_yaxes(title_text="drops / bin", row=2, col=1)
    layout(fig, height=400, xtitle="")
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    return [Fig("Retransmissions and bottleneck drops", fig,
                f"Total: {r.retransmits:.0f} retransmitted segments "
                f"(iperf3), {r.bottleneck_drops:.0f} bottleneck drops (whole recording, "
                f"as in checks.json), loss rate {100 * r.bottleneck_loss_rate:.3f} %.",
                "retrans")]


def _utilisation_fig(v: _RunView) -> list[Fig]:
    ag = v.s.get("aggregate")
    if ag is None or not len(ag):
        return []
    fig = DFig(lines([dict(x=ag["t_s"].to_numpy() + v.bin_s, y=100 * ag["utilisation"].to_numpy(),
                           name="utilisation", color="#333")], v.max_points))
    fig.add_hline(y=100, line=dict(color="#999", dash="dash", width=1), annotation_text="link rate",
                  annotation_position="top left")
    fig.update_yaxes(rangemode="tozero")
    v.outage_bands(fig)
    return [Fig("Link utilisation", layout(fig, "% of link rate"),
                f"{v.bin_s * 1000:g} ms bins of the bytes (frames) the bottleneck sent ÷ the link's rate. "
                f"Whole run, payload delivered while a flow was active ÷ the payload the link carries "
                f"(as the goodput health check): {100 * v.r.utilisation:.1f} %. From"
                + _bottleneck_sampling(v),
                "utilisation")]


def _with_gaps(t: np.ndarray, y: np.ndarray, interval_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Break a sampled line where the sampler missed its interval by more than half again (NaN),
    so the plot shows the true sample times instead of a straight line across the gap."""
    if not interval_s or len(t) < 2:
        return t, y
    gap = np.nonzero(np.diff(t) > 1.5 * interval_s)[0]
    return (np.insert(np.asarray(t, float), gap + 1, np.nan), np.insert(np.asarray(y, float), gap + 1, np.nan))


def _gap_mode(x: np.ndarray) -> str:
    """Markers too when the line is broken: a sample alone between two gaps has no line to draw."""
    return "lines+markers" if np.isnan(x).any() else "lines"


def _sampling_note(t: np.ndarray, interval_s: float | None, binned: bool = False) -> str:
    if len(t) < 2:
        return ""
    d = np.diff(t)
    note = f" {len(t)} samples, median spacing {1000 * np.median(d):.0f} ms, longest gap {1000 * d.max():.0f} ms"
    if interval_s and d.max() > 1.5 * interval_s:
        note += (f" (asked for every {1000 * interval_s:g} ms: the sampler was late; "
                 + ("a bin between two samples far apart reads their average, and bins above the link "
                    "rate mean the samples' times are uncertain)" if binned else
                    "the line is broken where it missed a sample)"))
    return note + "."


def _bottleneck_sampling(v: _RunView) -> str:
    """How the bottleneck was sampled: a bin between two samples far apart reads their average,
    and a sampler that was late cannot place the bytes in time (bins may then read above the link)."""
    q = v.s.get("queue")
    return _sampling_note(q["t_s"].to_numpy(), _qdisc_interval_s(v), binned=True) if q is not None and len(q) else "."


def _qdisc_interval_s(v: _RunView) -> float | None:
    ms = (v.record.capture or {}).get("qdisc_interval_ms")
    return float(ms) / 1000 if ms else None


def _qdelay_fig(v: _RunView) -> list[Fig]:
    q, qs = v.s.get("queue"), v.s.get("qdelay_srtt")
    if (q is None or not len(q)) and (qs is None or not len(qs)):
        return []
    tr = []
    if qs is not None and len(qs):
        for fl, g in qs.groupby("flow"):
            tr.append(dict(x=g["t_s"].to_numpy(), y=g["qdelay_ms"].to_numpy(),
                           name=f"{v.names.get(fl, fl)}: srtt − min RTT", color=v.color(fl), width=1))
    note = ""
    if q is not None and len(q):
        x, y = _with_gaps(q["t_s"].to_numpy(), q["qdelay_ms"].to_numpy(), _qdisc_interval_s(v))
        tr.append(dict(x=x, y=y, name="bottleneck backlog ÷ rate", color="#000", width=1.6, mode=_gap_mode(x)))
        note = " Bottleneck:" + _sampling_note(q["t_s"].to_numpy(), _qdisc_interval_s(v))
    fig = DFig(lines(tr, v.max_points))
    rate, buffer = v.link.rate_mbps, v.link.buffer_bytes
    if rate and buffer:  # a full buffer drained at the link rate: the most the queue can delay
        full_ms = buffer * 8 / (rate * 1e6) * 1000
        fig.add_hline(y=full_ms, line=dict(color="#999", dash="dash", width=1),
                      annotation_text=f"full buffer {full_ms:.3g} ms", annotation_position="top left")
    v.outage_bands(fig)
    return [Fig("Queueing delay", layout(fig, "ms"),
                "Per flow from ss (srtt minus the flow's lowest min_rtt); at the bottleneck "
                "from the qdisc backlog drained at the link rate." + note, "qdelay")]


def _queue_fig(v: _RunView) -> list[Fig]:
    q, r = v.s.get("queue"), v.r
    if q is None or not len(q):
        return []
    x, y = _with_gaps(q["t_s"].to_numpy(), q["queue_bdp"].to_numpy(), _qdisc_interval_s(v))
    fig = DFig(lines([dict(x=x, y=y, name="backlog", color="#333", mode=_gap_mode(x))], v.max_points))
    if v.link.buffer_bdp:
        fig.add_hline(y=float(v.link.buffer_bdp), line=dict(color="#999", dash="dash", width=1),
                      annotation_text=f"buffer {float(v.link.buffer_bdp):g} BDP")
    fig.update_yaxes(rangemode="tozero")
    v.outage_bands(fig)
    return [Fig("Bottleneck queue occupancy", layout(fig, "× BDP"),
                f"BDP = {v.link.bdp_bytes} bytes; mean {r.mean_queue_bdp:.2f}, "
                f"max {r.max_queue_bdp:.2f} BDP."
                + _sampling_note(q["t_s"].to_numpy(), _qdisc_interval_s(v)), "queue")]


def _cwnd_fig(v: _RunView) -> list[Fig]:
    ss, tp = v.run.tables.get("ss"), v.run.tables.get("tcp_probe")
    if ss is None or not len(ss):
        return []
    tr = []
    for fl, g in ss.groupby("flow"):
        tr.append(dict(x=g["t_s"].to_numpy(), y=g["cwnd"].to_numpy(), name=f"{v.names.get(fl, fl)} (ss)",
                       color=v.color(fl), legendgroup=str(fl)))
    probe = tp is not None and len(tp) > 0
    if tp is not None and probe:
        for fl, g in tp.groupby("flow"):
            tr.append(dict(x=g["t_s"].to_numpy(), y=g["snd_cwnd"].to_numpy(),
                           name=f"{v.names.get(fl, fl)} (tcp_probe)", color=v.color(fl), dash="dot",
                           width=0.8, legendgroup=str(fl)))
    fig = DFig(lines(tr, v.max_points))
    v.outage_bands(fig)
    return [Fig("Congestion window", layout(fig, "packets"),
                "ss -tin samples" + (", dotted: tcp:tcp_probe per-ACK samples" if probe else "") + ".", "cwnd")]


def _rtprop_fig(v: _RunView) -> list[Fig]:
    ss = v.run.tables.get("ss")
    if ss is None or not len(ss):
        return []
    tr = []
    for fl, g in ss.groupby("flow"):
        tr.append(dict(x=g["t_s"].to_numpy(), y=g["min_rtt_ms"].to_numpy(),
                       name=f"{v.names.get(fl, fl)} min_rtt", color=v.color(fl), legendgroup=str(fl)))
        if "bbr_mrtt_ms" in g and g["bbr_mrtt_ms"].notna().any():
            gg = g[g["bbr_mrtt_ms"].notna()]
            tr.append(dict(x=gg["t_s"].to_numpy(), y=gg["bbr_mrtt_ms"].to_numpy(),
                           name=f"{v.names.get(fl, fl)} BBR RTprop", color=v.color(fl), dash="dot",
                           legendgroup=str(fl)))
    fig = DFig(lines(tr, v.max_points, shape="hv"))
    v.outage_bands(fig)
    return [Fig("RTprop (min RTT)", layout(fig, "ms"),
                "ss min_rtt per flow; dotted: BBR's own RTprop estimate (ss bbr:mrtt).", "rtprop")]


def _cc_state_fig(v: _RunView) -> list[Fig]:
    st = v.run.tables.get("cc_state")
    return [cc_state_figure(st, v.names, v.max_points, v.color)] if st is not None and len(st) else []


