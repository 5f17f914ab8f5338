"""Plotly figures of one run and of a sweep.

Figures are plain plotly figures; the page (html.py) serialises them once and renders them lazily.
Long traces are decimated for display only (min/max per bucket, so spikes survive); metrics are
computed from all samples in cctest.metrics. Traces with many points use Scattergl.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import derived, metrics, stats
from .colors import CCColors, flow_ccs, sequential
from ..defaults import DEFAULT_MAX_POINTS  # noqa: E402,F401 (re-exported)
GL_THRESHOLD = 6000  # a figure with more displayed points than this uses WebGL traces
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#7f7f7f"]

# Enumerated cc_state keys: (cc, key) -> labels by value. Every module's `mode` is BBR's state
# machine, numbered alike (modules/bbr1/bbr1_trace_common.h, modules/bbr3/bbr3.c); phases are the
# variant's own.
BBR_MODES = {0: "STARTUP", 1: "DRAIN", 2: "PROBE_BW", 3: "PROBE_RTT"}
ENUMS = {
    ("bbr_modest", "phase"): {0: "none", 1: "search", 2: "linear"},
    ("bbr3", "phase"): {0: "DOWN", 1: "CRUISE", 2: "REFILL", 3: "UP"},
    ("bbr3plus", "phase"): {0: "DOWN", 1: "CRUISE", 2: "REFILL", 3: "UP"},
    ("bbr2", "phase"): {0: "DOWN", 1: "CRUISE", 2: "REFILL", 3: "UP"},
}


def state_enum(cc: str, key: str) -> dict | None:
    if key == "mode":
        return BBR_MODES
    return ENUMS.get((cc, key))


# cc_state keys carry their unit in their name (bits/s, µs) or are packets; shown in readable units.
PACKET_KEYS = {"cwnd", "upper_cwnd", "inflight_hi", "inflight_lo", "min_win", "max_win"}


def state_unit(key: str) -> tuple[str, float, str]:
    """(label, scale, unit) of a cc_state key: bw_bps -> ('bw', 1e-6, 'Mbit/s'), min_rtt_us -> ms."""
    if key.endswith("_bps"):
        return key[:-4], 1e-6, "Mbit/s"
    if key.endswith("_us"):
        return key[:-3], 1e-3, "ms"
    if key in PACKET_KEYS:
        return key, 1.0, "packets"
    return key, 1.0, ""


def decimate(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ~max_points samples: per bucket the minimum and the maximum of y, in order."""
    x = np.asarray(x)
    y = np.asarray(y, dtype=float)
    n = y.size
    if n <= max_points or max_points < 4:
        return x, y
    nb = max_points // 2
    k = int(np.ceil(n / nb))
    pad = nb * k - n
    yy = np.concatenate([y, np.full(pad, np.nan)]).reshape(nb, k)
    lo = np.argmin(np.where(np.isnan(yy), np.inf, yy), axis=1)
    hi = np.argmax(np.where(np.isnan(yy), -np.inf, yy), axis=1)
    base = np.arange(nb) * k
    idx = np.unique(np.concatenate([base + lo, base + hi]))
    idx = idx[idx < n]
    return x[idx], y[idx]


class DFig:
    """A plotly figure as plain dicts: the small part of go.Figure's API the run figures use.

    Building go.Figure objects validates every property and costs ~0.3 s per run; a sweep of 100
    runs would spend most of its time there. Rows stack subplots sharing the x axis.
    """

    def __init__(self, data=None, rows: int = 1, row_heights=None, vertical_spacing: float = 0.08,
                 subplot_titles=None):
        self.data = list(data or [])
        self.rows = rows
        self.layout: dict = {"shapes": [], "annotations": []}
        heights = row_heights or [1.0 / rows] * rows
        tot = sum(heights)
        avail = 1.0 - vertical_spacing * (rows - 1)
        top = 1.0
        for i in range(1, rows + 1):
            h = avail * heights[i - 1] / tot
            ya, xa = self._ax("y", i), self._ax("x", i)
            self.layout[ya] = {"domain": [max(0.0, top - h), top], "anchor": self._ref("x", i)}
            self.layout[xa] = {"anchor": self._ref("y", i)}
            if i > 1:
                self.layout[xa]["matches"] = "x"
            if i < rows:
                self.layout[xa]["showticklabels"] = False
            if subplot_titles:
                self.layout["annotations"].append(dict(
                    text=subplot_titles[i - 1], x=0.5, y=top, xref="paper", yref="paper", xanchor="center",
                    yanchor="bottom", showarrow=False, font=dict(size=12)))
            top -= h + vertical_spacing

    @staticmethod
    def _ax(kind: str, i: int) -> str:
        return f"{kind}axis" if i == 1 else f"{kind}axis{i}"

    @staticmethod
    def _ref(kind: str, i: int) -> str:
        return kind if i == 1 else f"{kind}{i}"

    def add_trace(self, trace: dict, row: int = 1, col: int = 1) -> "DFig":
        if row > 1:
            trace = dict(trace, xaxis=self._ref("x", row), yaxis=self._ref("y", row))
        self.data.append(trace)
        return self

    def _axes(self, kind: str, row: int | None):
        rows = [row] if row else range(1, self.rows + 1)
        return [self.layout[self._ax(kind, i)] for i in rows]

    def _update_axes(self, kind: str, row=None, col=None, title_text=None, **kw):
        for ax in self._axes(kind, row):
            if title_text is not None:
                ax["title"] = {"text": title_text}
            ax.update({k: v for k, v in kw.items() if v is not None})
        return self

    def update_xaxes(self, row=None, col=None, **kw):
        return self._update_axes("x", row, col, **kw)

    def update_yaxes(self, row=None, col=None, **kw):
        return self._update_axes("y", row, col, **kw)

    def update_layout(self, **kw):
        self.layout.update(kw)
        return self

    def add_hline(self, y, line=None, annotation_text=None, annotation_position="top right"):
        self.layout["shapes"].append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=y, y1=y,
                                          line=line or {}))
        if annotation_text:
            left = "left" in annotation_position
            below = "bottom" in annotation_position
            self.layout["annotations"].append(dict(
                text=annotation_text, xref="x domain", x=0 if left else 1, yref="y", y=y, showarrow=False,
                xanchor="left" if left else "right", yanchor="top" if below else "bottom",
                font=dict(size=11, color="#555")))
        return self

    def add_vrect(self, x0, x1, fillcolor="#888", opacity=0.1, line_width=0, annotation_text=None):
        self.layout["shapes"].append(dict(type="rect", xref="x", x0=x0, x1=x1, yref="y domain", y0=0, y1=1,
                                          fillcolor=fillcolor, opacity=opacity, line={"width": line_width},
                                          layer="below"))
        if annotation_text:  # at the band's top left
            self.layout["annotations"].append(dict(
                text=annotation_text, xref="x", x=x0, yref="y domain", y=1, showarrow=False,
                xanchor="left", yanchor="top", font=dict(size=11, color="#555")))
        return self

    def to_plotly_json(self) -> dict:
        return {"data": self.data, "layout": self.layout}


class Fig:
    """A titled figure for the page; `note` is shown under it."""

    def __init__(self, title: str, fig: go.Figure, note: str = "", key: str = ""):
        self.title, self.fig, self.note, self.key = title, fig, note, key


def _layout(fig, ytitle: str = "", xtitle: str = "time (s)", height: int = 340):
    named = sum(1 for t in fig.data if (t.get("showlegend", True) if isinstance(t, dict) else True))
    legend_rows = -(-named // 2)
    fig.update_layout(height=height + 20 * legend_rows, margin=dict(l=60, r=20, t=30, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-60 / height, x=0, font=dict(size=11)),
                      hovermode="x unified")
    fig.update_xaxes(title_text=xtitle)
    if ytitle:
        fig.update_yaxes(title_text=ytitle)
    return fig


def _lines(traces: list[dict], max_points: int, shape: str | None = None) -> list:
    """traces: dicts with x, y, name, color, and optional dash/width/legendgroup/showlegend/mode."""
    dec = []
    total = 0
    for t in traces:
        x, y = decimate(t["x"], t["y"], max_points)
        total += len(x)
        dec.append((t, x, y))
    kind = "scattergl" if total > GL_THRESHOLD else "scatter"
    out = []
    for t, x, y in dec:
        line = {k: v for k, v in (("color", t.get("color")), ("width", t.get("width", 1.4)),
                                  ("dash", t.get("dash"))) if v is not None}
        if shape and kind == "scatter":
            line["shape"] = shape
        tr = {"type": kind, "x": np.asarray(x, dtype=np.float32), "y": np.asarray(y, dtype=np.float32),
              "name": t["name"], "mode": t.get("mode", "lines"), "line": line,
              "showlegend": t.get("showlegend", True)}
        if "markers" in tr["mode"]:
            tr["marker"] = {"size": 4, **({"color": t["color"]} if t.get("color") else {})}
        if t.get("legendgroup") is not None:
            tr["legendgroup"] = t["legendgroup"]
        out.append(tr)
    return out


def flow_names(meta: dict) -> dict[int, str]:
    out = {}
    for i, f in enumerate(meta.get("flows") or []):
        if not isinstance(f, dict):
            continue
        fl = int(f.get("flow", i))
        rtt = f.get("rtt_ms")
        out[fl] = f"flow {fl} · {f.get('cc')}" + (f" · {rtt:g} ms" if isinstance(rtt, (int, float)) else "")
    return out


def flow_color(i: int) -> str:
    return PALETTE[int(i) % len(PALETTE)]


def flow_colors(meta: dict, colors: CCColors) -> dict[int, str]:
    """flow -> its cc's colour, the k-th of n flows of one cc in the k-th of n shades of it."""
    flows = [f for f in meta.get("flows") or [] if isinstance(f, dict)]
    ccs = flow_ccs(meta)
    out = {}
    for i, f in enumerate(flows):
        cc = str(f.get("cc"))
        same = [j for j, c in enumerate(ccs) if c == cc]
        out[int(f.get("flow", i))] = colors.shade(cc, same.index(i), len(same))
    return out


def run_figures(run, res: dict, *, max_points: int = DEFAULT_MAX_POINTS,
                jain_window_s: float = metrics.DEFAULT_JAIN_WINDOW_S, colors: CCColors | None = None) -> list[Fig]:
    """The figures of one run, in page order; each step returns its figures (none when its data
    is missing). `colors`: the page's cc colours (default: this run's own). Every time axis spans the
    flows' schedule, from the first flow's start (samplers that started earlier are cut off)."""
    v = _RunView(run, res, max_points, jain_window_s, colors or CCColors(flow_ccs(run.meta)))
    figs = [f for step in (_throughput_fig, _jain_fig, _group_share_fig, _retrans_drops_fig,
                           _utilisation_fig, _qdelay_fig, _queue_fig, _cwnd_fig, _rtprop_fig,
                           _cc_state_fig)
            for f in step(v)]
    if v.time_range:
        for f in figs:
            f.fig.update_xaxes(range=list(v.time_range))
    return figs


def schedule_range(meta: dict) -> tuple[float, float] | None:
    """(first flow's start, last flow's planned end) in seconds, or None without a flow schedule."""
    flows = [f for f in meta.get("flows") or [] if isinstance(f, dict)]
    starts = [float(f.get("start_s") or 0) for f in flows]
    ends = [float(f.get("start_s") or 0) + float(f["duration_s"]) for f in flows
            if isinstance(f.get("duration_s"), (int, float))]
    if not flows:
        return None
    end = max(ends) if ends else float(meta.get("duration_s") or 0)
    return (min(starts), end) if end > min(starts) else None


class _RunView:
    """What the figure steps share: the run, its metrics, flow names, the bin and steady window."""

    def __init__(self, run, res: dict, max_points: int, jain_window_s: float, colors: CCColors):
        self.run, self.res, self.meta = run, res, run.meta
        self.colors = colors
        self.flow_colors = flow_colors(self.meta, colors)
        self.time_range = schedule_range(self.meta)
        self.link = self.meta.get("link") or {}
        self.names = flow_names(self.meta)
        self.s, self.r = res["series"], res["run"]
        self.max_points, self.jain_window_s = max_points, jain_window_s
        self.bin_s = float(self.r.get("bin_s") or metrics.DEFAULT_BIN_MS / 1000)
        self.t0, self.t1 = self.r.get("steady_t0_s"), self.r.get("steady_t1_s")

    def name(self, fl) -> str:
        return self.names.get(fl, f"flow {fl}")

    def color(self, fl) -> str:
        return self.flow_colors.get(int(fl), "#777")

    def steady_band(self, fig) -> None:
        t0, t1 = self.t0, self.t1
        if t0 == t0 and t1 == t1 and t1 > t0:
            fig.add_vrect(x0=t0, x1=t1, fillcolor="#888", opacity=0.07, line_width=0)

    def outage_bands(self, fig) -> None:
        """Each link.outages span, when the link delivered nothing."""
        for t0, t1 in derived.outage_spans(self.meta):
            fig.add_vrect(x0=t0, x1=t1, fillcolor="#d62728", opacity=0.12, line_width=0, annotation_text="outage")

    def link_rate_line(self, fig, scale: float = 1.0, unit: str = "Mbit/s") -> None:
        """The link's rate: a line, or a step trace where link.rate_schedule changes it mid-run."""
        rate = self.link.get("rate_mbps")
        if not rate:
            return
        steps = sorted(float(s["at_s"]) for s in self.link.get("rate_schedule") or [])
        if not steps:
            fig.add_hline(y=rate * scale, line=dict(color="#999", dash="dash", width=1),
                          annotation_text=f"link {rate:g} Mbit/s", annotation_position="top left")
            return
        ends = [float(f.get("start_s", 0)) + float(f.get("duration_s", 0)) for f in self.meta.get("flows") or []]
        end = max([steps[-1] + 1.0, *ends])  # the last flow's planned end
        x = np.array([0.0, *steps, end])
        y = derived.link_rate_mbps_at(self.meta, x) * scale
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
    fig = DFig(_lines(tr, v.max_points))
    v.link_rate_line(fig)
    v.steady_band(fig)
    source = v.r.get("throughput_source", "")
    per_flow = ("what each receiver got in order (growth of the sender's bytes_acked, ss); right after "
                "a loss a flow's bin can exceed its share: the retransmission releases what the receiver "
                "held" if source == "ss bytes_acked" else
                "iperf3 sender intervals (what the application wrote; no ss samples in this run: it runs "
                "ahead of the link by up to the socket buffer)")
    agg = ("; aggregate: bytes (frames) the bottleneck qdisc sent, from" + _bottleneck_sampling(v)
           if ag is not None and len(ag) else "; no bottleneck samples, so no aggregate.")
    v.outage_bands(fig)
    return [Fig("Throughput per flow", _layout(fig, "Mbit/s"),
                f"{v.bin_s * 1000:g} ms bins. Per flow: {per_flow}{agg} Shaded: steady-state window "
                f"{v.t0:.1f}–{v.t1:.1f} s.", "throughput")]


def _jain_fig(v: _RunView) -> list[Fig]:
    js, r = v.s.get("jain"), v.r
    if js is None or not len(js) or len(v.names) <= 1 or v.s.get("binned") is None:
        return []
    fig = DFig(_lines([dict(x=js["t_s"].to_numpy(), y=js["jain"].to_numpy(),
                            name=f"Jain ({v.jain_window_s:g} s window)", color="#333")], v.max_points))
    fig.add_hline(y=r["jain"], line=dict(color="#666", dash="dash", width=1),
                  annotation_text=f"whole run {r['jain']:.3f}", annotation_position="bottom left")
    if r.get("jain_steady") == r.get("jain_steady"):
        fig.add_hline(y=r["jain_steady"], line=dict(color="#222", dash="dot", width=1),
                      annotation_text=f"steady {r['jain_steady']:.3f}", annotation_position="bottom right")
    v.steady_band(fig)
    fig.update_yaxes(range=[0, 1.02])
    v.outage_bands(fig)
    return [Fig("Jain's fairness index", _layout(fig, "J"),
                "Sliding window over the flows active in it; 1 = equal shares, 1/n = one flow takes all.", "jain")]


def _group_share_fig(v: _RunView) -> list[Fig]:
    gs = v.s.get("group_share")
    ccs = {f.get("cc") for f in v.meta.get("flows") or [] if isinstance(f, dict)}
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
    shares = ", ".join(f"{g['cc']} {100 * g['share']:.1f} %" for g in v.res["groups"])
    v.outage_bands(fig)
    return [Fig("Throughput share per congestion control", _layout(fig, "% of delivered bytes"),
                f"{metrics.SHARE_BIN_S:g} s intervals. Whole run: {shares}.", "group_share")]


def _retrans_drops_fig(v: _RunView) -> list[Fig]:
    rt, dr, r = v.s.get("retrans"), v.s.get("drops"), v.r
    if (rt is None or not len(rt)) and (dr is None or not len(dr)):
        return []
    fig = DFig(rows=2, vertical_spacing=0.08, row_heights=[0.55, 0.45])
    if rt is not None and len(rt):
        for fl, g in rt.groupby("flow"):
            for t in _lines([dict(x=g["t_s"].to_numpy(), y=g["retransmits"].to_numpy(), name=v.name(fl),
                                  color=v.color(fl))], v.max_points):
                fig.add_trace(t, row=1, col=1)
    if dr is not None and len(dr):
        x, y = decimate(dr["t_s"].to_numpy(), dr["drops"].to_numpy(), v.max_points)
        fig.add_trace(dict(type="bar", x=x.astype(np.float32), y=y.astype(np.float32),
                           name="bottleneck drops", marker=dict(color="#555")), row=2, col=1)
    fig.update_yaxes(title_text="retrans / bin", row=1, col=1)
    fig.update_yaxes(title_text="drops / bin", row=2, col=1)
    _layout(fig, height=400, xtitle="")
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    return [Fig("Retransmissions and bottleneck drops", fig,
                f"Total: {r.get('retransmits', float('nan')):.0f} retransmitted segments "
                f"(iperf3), {r.get('bottleneck_drops', float('nan')):.0f} bottleneck drops (whole recording, "
                f"as in checks.json), loss rate {100 * r.get('bottleneck_loss_rate', float('nan')):.3f} %.",
                "retrans")]


def _utilisation_fig(v: _RunView) -> list[Fig]:
    ag = v.s.get("aggregate")
    if ag is None or not len(ag):
        return []
    fig = DFig(_lines([dict(x=ag["t_s"].to_numpy() + v.bin_s, y=100 * ag["utilisation"].to_numpy(),
                            name="utilisation", color="#333")], v.max_points))
    fig.add_hline(y=100, line=dict(color="#999", dash="dash", width=1), annotation_text="link rate",
                  annotation_position="top left")
    fig.update_yaxes(rangemode="tozero")
    v.outage_bands(fig)
    return [Fig("Link utilisation", _layout(fig, "% of link rate"),
                f"{v.bin_s * 1000:g} ms bins of the bytes (frames) the bottleneck sent ÷ the link's rate. "
                f"Whole run, payload delivered while a flow was active ÷ the payload the link carries "
                f"(as the goodput health check): {100 * v.r.get('utilisation', float('nan')):.1f} %. From"
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
    ms = (v.meta.get("capture") or {}).get("qdisc_interval_ms")
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
    fig = DFig(_lines(tr, v.max_points))
    rate, buffer = v.link.get("rate_mbps"), v.link.get("buffer_bytes")
    if rate and buffer:  # a full buffer drained at the link rate: the most the queue can delay
        full_ms = buffer * 8 / (rate * 1e6) * 1000
        fig.add_hline(y=full_ms, line=dict(color="#999", dash="dash", width=1),
                      annotation_text=f"full buffer {full_ms:.3g} ms", annotation_position="top left")
    v.outage_bands(fig)
    return [Fig("Queueing delay", _layout(fig, "ms"),
                "Per flow from ss (srtt minus the flow's lowest min_rtt); at the bottleneck "
                "from the qdisc backlog drained at the link rate." + note, "qdelay")]


def _queue_fig(v: _RunView) -> list[Fig]:
    q, r = v.s.get("queue"), v.r
    if q is None or not len(q):
        return []
    x, y = _with_gaps(q["t_s"].to_numpy(), q["queue_bdp"].to_numpy(), _qdisc_interval_s(v))
    fig = DFig(_lines([dict(x=x, y=y, name="backlog", color="#333", mode=_gap_mode(x))], v.max_points))
    if v.link.get("buffer_bdp"):
        fig.add_hline(y=float(v.link["buffer_bdp"]), line=dict(color="#999", dash="dash", width=1),
                      annotation_text=f"buffer {float(v.link['buffer_bdp']):g} BDP")
    fig.update_yaxes(rangemode="tozero")
    v.outage_bands(fig)
    return [Fig("Bottleneck queue occupancy", _layout(fig, "× BDP"),
                f"BDP = {v.link.get('bdp_bytes')} bytes; mean {r.get('mean_queue_bdp', float('nan')):.2f}, "
                f"max {r.get('max_queue_bdp', float('nan')):.2f} BDP."
                + _sampling_note(q["t_s"].to_numpy(), _qdisc_interval_s(v)), "queue")]


def _cwnd_fig(v: _RunView) -> list[Fig]:
    ss, tp = v.run.tables.get("ss"), v.run.tables.get("tcp_probe")
    if ss is None or not len(ss):
        return []
    tr = []
    for fl, g in ss.groupby("flow"):
        tr.append(dict(x=g["t_s"].to_numpy(), y=g["cwnd"].to_numpy(), name=f"{v.names.get(fl, fl)} (ss)",
                       color=v.color(fl), legendgroup=str(fl)))
    probe = tp is not None and len(tp)
    if probe:
        for fl, g in tp.groupby("flow"):
            tr.append(dict(x=g["t_s"].to_numpy(), y=g["snd_cwnd"].to_numpy(),
                           name=f"{v.names.get(fl, fl)} (tcp_probe)", color=v.color(fl), dash="dot",
                           width=0.8, legendgroup=str(fl)))
    fig = DFig(_lines(tr, v.max_points))
    v.outage_bands(fig)
    return [Fig("Congestion window", _layout(fig, "packets"),
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
    fig = DFig(_lines(tr, v.max_points, shape="hv"))
    v.outage_bands(fig)
    return [Fig("RTprop (min RTT)", _layout(fig, "ms"),
                "ss min_rtt per flow; dotted: BBR's own RTprop estimate (ss bbr:mrtt).", "rtprop")]


def _cc_state_fig(v: _RunView) -> list[Fig]:
    st = v.run.tables.get("cc_state")
    return [cc_state_figure(st, v.names, v.max_points, v.color)] if st is not None and len(st) else []


def _state_title(cc: str, key: str) -> str:
    label, _, unit = state_unit(key)
    return f"{cc}: {label}" + (f" ({unit})" if unit else "")


def cc_state_figure(st: pd.DataFrame, names: dict, max_points: int, color=flow_color) -> Fig:
    st = st.assign(cc=st["cc"].astype(object), key=st["key"].astype(object))
    keys = [tuple(k) for k in st[["cc", "key"]].drop_duplicates().itertuples(index=False)]
    by_key = dict(iter(st.groupby(["cc", "key"], sort=False)))
    n = len(keys)
    fig = DFig(rows=n, vertical_spacing=min(0.06, 0.3 / max(n, 1)),
               subplot_titles=[_state_title(cc, k) for cc, k in keys])
    shown = set()
    for i, (cc, key) in enumerate(keys, start=1):
        d = by_key[(cc, key)]
        enum = state_enum(cc, key)
        scale = 1.0 if enum else state_unit(key)[1]
        for fl, g in d.groupby("flow"):
            g = g.sort_values("t_s")
            for t in _lines([dict(x=g["t_s"].to_numpy(), y=g["value"].to_numpy() * scale,
                                  name=names.get(fl, f"flow {fl}"), color=color(fl),
                                  legendgroup=str(fl), showlegend=fl not in shown)],
                            max_points, shape="hv" if enum else None):
                fig.add_trace(t, row=i, col=1)
            shown.add(fl)
        if enum:
            fig.update_yaxes(tickvals=list(enum), ticktext=list(enum.values()),
                             range=[min(enum) - 0.3, max(enum) + 0.3], row=i, col=1)
    _layout(fig, xtitle="", height=max(260, 170 * n))
    fig.update_xaxes(title_text="time (s)", row=n, col=1)
    enums = "; ".join(f"{cc} {k}: " + ", ".join(f"{v}={lab}" for v, lab in e.items())
                      for cc, k in keys for e in [state_enum(cc, k)] if e)
    return Fig("Congestion-control internal state (module tracepoint)", fig,
               "One subplot per state key, one line per flow; rates in Mbit/s, times in ms, gains as "
               "multipliers." + (f" Enumerations: {enums}." if enums else ""),
               "cc_state")


# ---------------------------------------------------------------------------------------------
# Sweep figures (several runs)
# ---------------------------------------------------------------------------------------------


def _varies(df: pd.DataFrame, col: str) -> bool:
    return col in df and df[col].dropna().nunique() > 1


def _mean_ci(df: pd.DataFrame, by: list[str], y: str) -> pd.DataFrame:
    rows = []
    for k, g in df.groupby(by, dropna=False, sort=True):
        mean, ci, n = stats.mean_ci95(pd.to_numeric(g[y], errors="coerce"))
        rows.append(dict(zip(by, k if isinstance(k, tuple) else (k,)), mean=mean, ci=ci, n=n))
    return pd.DataFrame(rows)


def _other_label(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
    """A label of the remaining varying parameters (so lines never silently mix conditions)."""
    cand = ["rate_mbps", "rtt_ms", "buffer_bdp", "loss_pct"] + [c for c in df.columns
                                                                 if c.startswith("matrix.")]
    cols = [c for c in cand if c not in exclude and _varies(df, c)]
    # matrix keys that merely restate a link field are covered by that field.
    cols = [c for c in cols if not (c.startswith("matrix.") and any(
        c[7:] in (lf, lf.replace("_ms", "").replace("_pct", "").replace("_bdp", ""))
        for lf in ("rate_mbps", "rtt_ms", "buffer_bdp", "loss_pct")))]
    if not cols:
        return pd.Series("", index=df.index)
    return df[cols].astype(str).apply(lambda r: ", ".join(f"{c.replace('matrix.', '')}={v}"
                                                          for c, v in r.items()), axis=1)


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


MAX_FACET_COLS = 4


def _numeric(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _line_colors(lines: list, colors: CCColors | None):
    """Line label -> colour: a label naming a cc (first word) takes the cc's colour (lines of one cc
    in shades of it); other labels (an RTT, a rate) take the sequential scale no cc uses."""
    colors = colors or CCColors()
    ccs = [str(lv).split(" ", 1)[0] for lv in lines]
    if all(colors.knows(cc) for cc in ccs):
        return {lv: colors.shade(cc, [c for c in ccs[:i]].count(cc), ccs.count(cc))
                for i, (lv, cc) in enumerate(zip(lines, ccs))}
    return {lv: sequential(i, len(lines)) for i, lv in enumerate(lines)}


def _line_fig(df: pd.DataFrame, x: str, y: str, facet: str, line: str, xtitle: str, ytitle: str,
              yscale: float = 1.0, band: tuple[str, str] | None = None, yrange=None,
              xlog: bool = False, colors: CCColors | None = None) -> go.Figure:
    """Mean +- 95 % CI of `y` vs `x`: one panel per `facet` value (wrapped), one line per `line`.
    `x` may be numbers (a line) or categories (an aqm, ecn on/off: points joined in the matrix's order).

    Panels where `x` takes fewer than two values are left out (nothing to plot against); None
    when no panel remains.
    """
    df = df[df[y].notna()] if y in df else df
    if not len(df):
        return None
    if not _numeric(df[x]):
        order = list(dict.fromkeys(df[x].astype(str)))
        df = df.assign(**{x: pd.Categorical(df[x].astype(str), categories=order, ordered=True)})
    nx = df.groupby(facet, observed=True)[x].nunique()
    df = df[df[facet].isin(nx[nx >= 2].index)]
    if df.empty:
        return None
    facets = list(dict.fromkeys(df[facet]))
    ncols = min(MAX_FACET_COLS, len(facets))
    nrows = -(-len(facets) // ncols)
    fig = make_subplots(rows=nrows, cols=ncols, shared_yaxes=True, subplot_titles=[str(f) for f in facets],
                        horizontal_spacing=0.03, vertical_spacing=0.18 / nrows + 0.05)
    lines = list(dict.fromkeys(df[line]))
    line_color = _line_colors(lines, colors)
    categorical = isinstance(df[x].dtype, pd.CategoricalDtype)
    shown = set()
    for fi, fv in enumerate(facets):
        row, col = fi // ncols + 1, fi % ncols + 1
        for lv in lines:
            d = df[(df[facet] == fv) & (df[line] == lv)]
            if d.empty:
                continue
            agg = _mean_ci(d, [x], y).sort_values(x)
            agg = agg[agg["n"] > 0]
            color = line_color[lv]
            xs = agg[x].astype(str).to_numpy() if categorical else agg[x].to_numpy(float)
            if band:
                lo = d.groupby(x, observed=True)[band[0]].mean().reindex(agg[x]).to_numpy(float) * yscale
                hi = d.groupby(x, observed=True)[band[1]].mean().reindex(agg[x]).to_numpy(float) * yscale
                fig.add_trace(go.Scatter(x=xs, y=hi, mode="lines", line=dict(width=0.6, color=color),
                                         showlegend=False, legendgroup=str(lv), hoverinfo="skip"),
                              row=row, col=col)
                fig.add_trace(go.Scatter(x=xs, y=lo, mode="lines", line=dict(width=0.6, color=color),
                                         fill="tonexty", fillcolor=_rgba(color, 0.18), showlegend=False,
                                         legendgroup=str(lv), hoverinfo="skip"), row=row, col=col)
            fig.add_trace(go.Scatter(
                x=xs, y=agg["mean"].to_numpy(float) * yscale, mode="lines+markers", name=str(lv),
                legendgroup=str(lv), showlegend=lv not in shown, line=dict(color=color, width=2),
                customdata=agg["n"].to_numpy(), hovertemplate="%{y:.3g} (n=%{customdata})",
                error_y=dict(type="data", array=(agg["ci"].fillna(0) * yscale).to_numpy(float), visible=True,
                             thickness=1)), row=row, col=col)
            shown.add(lv)
        fig.update_xaxes(title_text=xtitle if row == nrows or fi + ncols >= len(facets) else None,
                         type="log" if xlog else ("category" if categorical else None), row=row, col=col)
    for r in range(1, nrows + 1):
        fig.update_yaxes(title_text=ytitle, row=r, col=1)
    if yrange:
        fig.update_yaxes(range=yrange)
    fig.update_annotations(font_size=12)
    fig.update_layout(height=120 + 290 * nrows, margin=dict(l=60, r=20, t=40, b=50),
                      legend=dict(orientation="h", y=-0.08 - 0.3 / (nrows + 1), x=0), hovermode="closest")
    return fig


def _add(figs: list[Fig], f: Fig) -> None:
    if f.fig is not None:
        figs.append(f)


CI_NOTE = "Points: mean over repetitions; error bars: 95 % Student-t CI."
# What a matrix key's last part means on an axis; other keys are shown by name.
AXIS_TITLES = {"rate_mbps": "bottleneck rate (Mbit/s)", "buffer_bdp": "buffer (× BDP)", "aqm": "AQM",
               "ecn": "ECN", "loss_pct": "random loss (%)", "rtt_ms": "RTT (ms)", "buffer_bytes": "buffer (bytes)",
               "duration_s": "duration (s)", "bdp_rtt_ms": "BDP reference RTT (ms)"}
# Keys the dedicated steps plot (buffer, RTTs, loss) or that make the facets (the cc mix).
DEDICATED = ("buffer_bdp", "loss_pct", "rtt_ms", "cc")


class _SweepView:
    """What the sweep steps share: healthy runs only (a run whose emulation health is *fail* is
    left out of every line and named in each figure's note), the page's cc colours, and whether the
    runs are a paper suite (their seed figures are then cited in the notes)."""

    def __init__(self, summary, colors: CCColors | None):
        runs = summary.runs
        verdict = runs["verdict"] if "verdict" in runs else pd.Series(None, index=runs.index)
        self.failed = runs[verdict == "fail"]
        self.runs = runs[verdict != "fail"]
        ok = set(self.runs["run_id"])
        self.groups = summary.groups[summary.groups["run_id"].isin(ok)] if not summary.groups.empty else summary.groups
        self.flows = summary.flows[summary.flows["run_id"].isin(ok)] if not summary.flows.empty else summary.flows
        self.matrix_keys = summary.matrix_keys
        self.colors = colors or CCColors()
        self.paper = "tags" in runs and runs["tags"].fillna("").astype(str).str.contains(r"\bpaper-").any()
        wall = runs[runs.get("clock", pd.Series("", index=runs.index)) == "wall"]
        self.wall = list(wall["run_id"].astype(str))

    def note(self, text: str, seed: str = "") -> str:
        """A figure's note: what it shows, which runs were left out or are on the wall clock, and for a
        paper suite the seed figure it reproduces."""
        out = text + " " + CI_NOTE
        if len(self.failed):
            out += (f" Left out (emulation health fail): {len(self.failed)} run(s): "
                    + ", ".join(self.failed["run_id"].astype(str)) + ".")
        if self.wall:
            out += f" On the wall clock (numbers depend on the host's load): {', '.join(self.wall)}."
        if seed and self.paper:
            out += f" Reproduces {seed}."
        return out

    def matrix_frame(self, df: pd.DataFrame) -> pd.DataFrame:
        cols = [c for c in self.runs.columns if c.startswith("matrix.") or c in ("clock", "aqm", "ecn")]
        cols = [c for c in cols if c not in df.columns]
        return df.merge(self.runs[["run_id"] + cols], on="run_id") if cols else df


def sweep_figures(summary, colors: CCColors | None = None) -> list[Fig]:
    """The across-runs figures, in page order: each named step returns its figures (none when the
    runs do not vary what it plots)."""
    if summary.runs.empty or len(summary.runs) < 2:
        return []
    v = _SweepView(summary, colors)
    if len(v.runs) < 2:
        return []
    return [f for step in (_sweep_buffer, _sweep_rtt, _sweep_loss, _sweep_other_keys, _throughput_delay_scatter)
            for f in step(v)]


def _sweep_buffer(v: _SweepView) -> list[Fig]:
    figs: list[Fig] = []
    runs, groups = v.runs, v.groups
    if not _varies(runs, "buffer_bdp"):
        return figs
    d = runs.copy()
    other = _other_label(d, {"buffer_bdp", "rtt_ms"})
    d["line"] = "RTT " + d["rtt_ms"].map(lambda x: f"{x:g} ms") + other.map(lambda s: f" ({s})" if s else "")
    if (d["flows"] > 1).any():
        _add(figs, Fig("Jain's fairness index vs bottleneck buffer",
                       _line_fig(d[d["flows"] > 1], "buffer_bdp", "jain_steady", "algos", "line",
                                 "buffer (× BDP)", "Jain's index (steady state)", yrange=[0, 1.05], colors=v.colors),
                       v.note("One panel per algorithm mix, one line per RTT.", "000 Fig. 13"), "sweep_jain_buffer"))
    if not groups.empty and groups.groupby("run_id")["cc"].nunique().max() > 1:
        g = groups[groups["run_id"].isin(groups.groupby("run_id")["cc"].nunique().loc[lambda s: s > 1].index)]
        g = v.matrix_frame(g)
        other = _other_label(g, {"buffer_bdp"})
        g = g.assign(facet=g["algos"] + other.map(lambda s: f" · {s}" if s else ""))
        _add(figs, Fig("Throughput share per congestion control vs bottleneck buffer",
                       _line_fig(g, "buffer_bdp", "steady_share", "facet", "cc", "buffer (× BDP)",
                                 "% of throughput", yscale=100,
                                 band=("steady_share_p25", "steady_share_p75"), yrange=[0, 100], colors=v.colors),
                       v.note("Thick lines: mean share (steady state); bands: 25th–75th percentile of the "
                              f"{metrics.SHARE_BIN_S:g} s interval shares (mean over repetitions).", "004 Fig. 10"),
                       "sweep_share_buffer"))
    if not groups.empty:
        g = v.matrix_frame(groups)
        other = _other_label(g, {"buffer_bdp"})
        g = g.assign(line=g["cc"] + other.map(lambda s: f" ({s})" if s else ""))
        _add(figs, Fig("Retransmitted segments per congestion control vs bottleneck buffer",
                       _line_fig(g, "buffer_bdp", "retransmits", "algos", "line", "buffer (× BDP)",
                                 "retransmitted segments", colors=v.colors),
                       v.note("Sum over the flows of each congestion control (iperf3 sender totals).",
                              "000 Fig. 8, 001 Fig. 9"), "sweep_retrans_buffer"))
    return figs


def _sweep_rtt(v: _SweepView) -> list[Fig]:
    figs: list[Fig] = []
    runs = v.runs
    two = runs[(runs["flows"] == 2) & (runs["flow_rtt_min_ms"] < runs["flow_rtt_max_ms"])]
    if len(two) <= 1 or not _varies(two, "flow_rtt_max_ms"):
        return figs
    d = two.copy()
    other = _other_label(d, {"rtt_ms", "flow_rtt_max_ms"})
    d["line"] = d["algos"] + d["buffer_bdp"].map(lambda x: f", {x:g} BDP") + other.map(
        lambda s: f" ({s})" if s else "")
    d["facet"] = d["flow_rtt_min_ms"].map(lambda x: f"{x:g} ms flow")
    _add(figs, Fig("Throughput share of the short-RTT flow vs the other flow's RTT",
                   _line_fig(d, "flow_rtt_max_ms", "short_rtt_flow_share", "facet", "line",
                             "other flow's RTT (ms)", "% of throughput", yscale=100, yrange=[0, 100]),
                   v.note("Steady-state share of the flow with the smaller RTT; 50 % is fair.", "001 Fig. 7"),
                   "sweep_share_rtt"))
    d["facet"] = d["rate_mbps"].map(lambda x: f"{x:g} Mbit/s")
    _add(figs, Fig("Jain's fairness index vs RTT ratio",
                   _line_fig(d, "rtt_ratio", "jain_steady", "facet", "line", "RTT ratio (long / short)",
                             "Jain's index (steady state)", yrange=[0, 1.05]),
                   v.note("One panel per bottleneck rate.", "001 Fig. 8"), "sweep_jain_rtt"))
    return figs


def _sweep_loss(v: _SweepView) -> list[Fig]:
    runs = v.runs
    if not _varies(runs, "loss_pct"):
        return []
    d = runs.copy()
    other = _other_label(d, {"loss_pct", "buffer_bdp"})
    d["line"] = d["algos"] + other.map(lambda s: f" ({s})" if s else "")
    d["facet"] = d["buffer_bdp"].map(lambda x: f"buffer {x:g} BDP")
    figs: list[Fig] = []
    _add(figs, Fig("Link utilisation vs random loss rate",
                   _line_fig(d, "loss_pct", "utilisation", "facet", "line", "random loss (%)",
                             "utilisation (%)", yscale=100),
                   v.note("Delivered bytes ÷ (link rate × duration).", "001 Fig. 4"), "sweep_util_loss"))
    return figs


def swept_keys(v: _SweepView) -> list[str]:
    """Matrix keys the runs vary that no dedicated step plots (a rate, an aqm, ecn, a module parameter...)."""
    out = []
    for key in v.matrix_keys:
        col = f"matrix.{key}"
        if key.rsplit(".", 1)[-1] not in DEDICATED and col in v.runs and v.runs[col].astype(str).nunique() > 1:
            out.append(key)
    return out


def _sweep_other_keys(v: _SweepView) -> list[Fig]:
    """For each other swept key: share per cc, Jain's index, utilisation and queueing delay against it."""
    figs: list[Fig] = []
    for key in swept_keys(v):
        col = f"matrix.{key}"
        title = AXIS_TITLES.get(key.rsplit(".", 1)[-1], key)
        slug = "".join(c if c.isalnum() else "_" for c in key)
        runs = v.runs.copy()
        runs[col] = runs[col].map(lambda x: str(x) if isinstance(x, bool) else x)
        # not a label: the swept key itself, the link field it sets (rate_mbps for link.rate_mbps), the cc mix
        exclude = {col, key.rsplit(".", 1)[-1]} | {f"matrix.{k}" for k in v.matrix_keys if k.rsplit(".", 1)[-1] == "cc"}
        other = _other_label(runs, exclude)
        runs["line"] = runs["algos"] + other.map(lambda s: f" ({s})" if s else "")
        runs["facet"] = "all runs"
        g = v.matrix_frame(v.groups) if not v.groups.empty else v.groups
        if not g.empty and g.groupby("run_id")["cc"].nunique().max() > 1:
            g = g.copy()
            g[col] = g[col].map(lambda x: str(x) if isinstance(x, bool) else x)
            g_other = _other_label(g, exclude)
            g["facet"] = g["algos"] + g_other.map(lambda s: f" · {s}" if s else "")
            _add(figs, Fig(f"Throughput share per congestion control vs {title}",
                           _line_fig(g, col, "steady_share", "facet", "cc", title, "% of throughput", yscale=100,
                                     yrange=[0, 100], colors=v.colors),
                           v.note("Steady-state share of each congestion control; one panel per algorithm mix "
                                  "and setting of the other swept keys."),
                           f"sweep_share_{slug}"))
        if (runs["flows"] > 1).any():
            _add(figs, Fig(f"Jain's fairness index vs {title}",
                           _line_fig(runs[runs["flows"] > 1], col, "jain_steady", "facet", "line", title,
                                     "Jain's index (steady state)", yrange=[0, 1.05], colors=v.colors),
                           v.note("One line per algorithm mix."), f"sweep_jain_{slug}"))
        _add(figs, Fig(f"Link utilisation vs {title}",
                       _line_fig(runs, col, "utilisation", "facet", "line", title, "utilisation (%)", yscale=100,
                                 colors=v.colors),
                       v.note("Payload delivered while a flow was active ÷ what the link carries."),
                       f"sweep_util_{slug}"))
        _add(figs, Fig(f"Mean queueing delay vs {title}",
                       _line_fig(runs, col, "mean_queue_delay_ms", "facet", "line", title, "ms", colors=v.colors),
                       v.note("Bottleneck backlog ÷ link rate, averaged over the steady state."),
                       f"sweep_qdelay_{slug}"))
    return figs


def _throughput_delay_scatter(v: _SweepView) -> list[Fig]:
    """Per flow: steady-state throughput against its mean smoothed RTT, one colour per cc (Pantheon's
    throughput-vs-delay plot; the delay axis runs right to left, so better is up and to the right)."""
    flows = v.flows
    if flows.empty or "mean_srtt_ms" not in flows or not flows["mean_srtt_ms"].notna().any():
        return []
    fig = go.Figure()
    for cc, g in flows[flows["mean_srtt_ms"].notna()].groupby("cc", sort=False):
        fig.add_trace(go.Scatter(
            x=g["mean_srtt_ms"], y=g["steady_mbps"], mode="markers", name=str(cc),
            marker=dict(color=v.colors.of(cc), size=8, opacity=0.8),
            text=g["group_label"].astype(str) + " r" + g["repetition"].astype(str) + " flow " + g["flow"].astype(str),
            hovertemplate="%{text}<br>%{y:.3g} Mbit/s, %{x:.3g} ms<extra></extra>"))
    fig.update_xaxes(title_text="mean srtt (ms), lower is better →", autorange="reversed")
    fig.update_yaxes(title_text="steady-state throughput (Mbit/s)", rangemode="tozero")
    fig.update_layout(height=420, margin=dict(l=60, r=20, t=30, b=50), legend=dict(orientation="h", y=-0.18, x=0),
                      hovermode="closest")
    note = ("One point per flow and run: its steady-state throughput and mean smoothed RTT (ss). Upper right "
            "is better.")
    return [Fig("Throughput vs delay per flow", fig, v.note(note).replace(" " + CI_NOTE, ""), "sweep_tput_delay")]


def throughput_table(summary) -> pd.DataFrame:
    """Max/min/avg throughput (1 s intervals) per configuration, flow and algorithm, averaged over
    repetitions (the layout of 003 Table 1); `health fail`: how many of those runs failed their
    emulation-health checks (their numbers are in the means: read them with that doubt)."""
    f = summary.flows
    if f.empty:
        return f
    cols = ["max_mbps_1s", "min_mbps_1s", "avg_mbps_1s"]
    t = (f.groupby(["group_label", "flow", "cc"], sort=False)[cols].mean().reset_index())
    t["runs"] = f.groupby(["group_label", "flow", "cc"], sort=False).size().to_numpy()
    runs = summary.runs
    if "verdict" in runs:
        failed = set(runs.loc[runs["verdict"] == "fail", "run_id"])
        t["health fail"] = (f.assign(failed=f["run_id"].isin(failed))
                            .groupby(["group_label", "flow", "cc"], sort=False)["failed"].sum().to_numpy())
    return t
