"""The across-runs figures of a sweep, in page order: `sweep_figures` is their table of contents,
each `_sweep_*` step a function of the sweep's view that returns its figures (none when the runs
do not vary what it plots). Each point is a mean over repetitions with its 95 % CI; runs whose
emulation health is *fail* are left out and named. Also the per-flow throughput table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis import metrics, stats
from ..model.record import LINK_SETTINGS
from .colors import CCColors, sequential
from .figure import Fig

if TYPE_CHECKING:
    from ..analysis.summary import Summary

CI_NOTE = "Points: mean over repetitions; error bars: 95 % Student-t CI."
# What a matrix key's last part means on an axis; other keys are shown by name.
AXIS_TITLES = {"rate_mbps": "bottleneck rate (Mbit/s)", "buffer_bdp": "buffer (× BDP)", "aqm": "AQM",
               "ecn": "ECN", "loss_pct": "random loss (%)", "rtt_ms": "RTT (ms)", "buffer_bytes": "buffer (bytes)",
               "duration_s": "duration (s)", "bdp_rtt_ms": "BDP reference RTT (ms)"}
# Keys the dedicated steps plot (buffer, RTTs, loss) or that make the facets (the cc mix).
DEDICATED = ("buffer_bdp", "loss_pct", "rtt_ms", "cc")
MAX_FACET_COLS = 4


class _SweepView:
    """What the sweep steps share: healthy runs only (a run whose emulation health is *fail* is
    left out of every line and named in each figure's note), the page's cc colours, and whether the
    runs are a paper suite (their seed figures are then cited in the notes)."""

    def __init__(self, summary: Summary, colors: CCColors | None) -> None:
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


def sweep_figures(summary: Summary, colors: CCColors | None = None) -> list[Fig]:
    """The across-runs figures, in page order: each named step returns its figures (none when the
    runs do not vary what it plots)."""
    if summary.runs.empty or len(summary.runs) < 2:
        return []
    v = _SweepView(summary, colors)
    if len(v.runs) < 2:
        return []
    steps = (_sweep_jain_buffer, _sweep_share_buffer, _sweep_retrans_buffer, _sweep_share_rtt, _sweep_jain_rtt,
             _sweep_util_loss, _sweep_other_keys, _sweep_throughput_delay)
    return [f for step in steps for f in step(v)]


def _figure(title: str, fig: go.Figure | None, note: str, key: str) -> list[Fig]:
    """The titled figure, or none when its plot had no panel to show."""
    return [Fig(title, fig, note, key)] if fig is not None else []


def _sweep_jain_buffer(v: _SweepView) -> list[Fig]:
    d = v.runs[v.runs["flows"] > 1]
    if not _varies(v.runs, "buffer_bdp") or d.empty:
        return []
    d = d.assign(line="RTT " + d["rtt_ms"].map(lambda x: f"{x:g} ms")
                 + _suffix(_other_label(v.runs, {"buffer_bdp", "rtt_ms"}).loc[d.index], " ({})"))
    return _figure("Jain's fairness index vs bottleneck buffer",
                   _line_fig(d, "buffer_bdp", "jain_steady", "algos", "line", "buffer (× BDP)",
                             "Jain's index (steady state)", yrange=[0, 1.05], colors=v.colors),
                   v.note("One panel per algorithm mix, one line per RTT.", "000 Fig. 13"), "sweep_jain_buffer")


def _sweep_share_buffer(v: _SweepView) -> list[Fig]:
    groups = v.groups
    if not _varies(v.runs, "buffer_bdp") or groups.empty:
        return []
    mixes = groups.groupby("run_id")["cc"].nunique()
    if mixes.max() <= 1:
        return []
    g = v.matrix_frame(groups[groups["run_id"].isin(mixes[mixes > 1].index)])
    g = g.assign(facet=g["algos"] + _suffix(_other_label(g, {"buffer_bdp"}), " · {}"))
    return _figure("Throughput share per congestion control vs bottleneck buffer",
                   _line_fig(g, "buffer_bdp", "steady_share", "facet", "cc", "buffer (× BDP)", "% of throughput",
                             yscale=100, band=("steady_share_p25", "steady_share_p75"), yrange=[0, 100],
                             colors=v.colors),
                   v.note("Thick lines: mean share (steady state); bands: 25th–75th percentile of the "
                          f"{metrics.SHARE_BIN_S:g} s interval shares (mean over repetitions).", "004 Fig. 10"),
                   "sweep_share_buffer")


def _sweep_retrans_buffer(v: _SweepView) -> list[Fig]:
    if not _varies(v.runs, "buffer_bdp") or v.groups.empty:
        return []
    g = v.matrix_frame(v.groups)
    g = g.assign(line=g["cc"] + _suffix(_other_label(g, {"buffer_bdp"}), " ({})"))
    return _figure("Retransmitted segments per congestion control vs bottleneck buffer",
                   _line_fig(g, "buffer_bdp", "retransmits", "algos", "line", "buffer (× BDP)",
                             "retransmitted segments", colors=v.colors),
                   v.note("Sum over the flows of each congestion control (iperf3 sender totals).",
                          "000 Fig. 8, 001 Fig. 9"), "sweep_retrans_buffer")


def _two_rtt_runs(v: _SweepView) -> pd.DataFrame:
    """Runs of two flows with different RTTs, lined by algorithms and buffer, when the longer RTT
    varies (else empty)."""
    runs = v.runs
    two = runs[(runs["flows"] == 2) & (runs["flow_rtt_min_ms"] < runs["flow_rtt_max_ms"])]
    if len(two) <= 1 or not _varies(two, "flow_rtt_max_ms"):
        return two.iloc[0:0]
    other = _other_label(two, {"rtt_ms", "flow_rtt_max_ms"})
    return two.assign(line=two["algos"] + two["buffer_bdp"].map(lambda x: f", {x:g} BDP") + _suffix(other, " ({})"))


def _sweep_share_rtt(v: _SweepView) -> list[Fig]:
    d = _two_rtt_runs(v)
    if d.empty:
        return []
    d = d.assign(facet=d["flow_rtt_min_ms"].map(lambda x: f"{x:g} ms flow"))
    return _figure("Throughput share of the short-RTT flow vs the other flow's RTT",
                   _line_fig(d, "flow_rtt_max_ms", "short_rtt_flow_share", "facet", "line",
                             "other flow's RTT (ms)", "% of throughput", yscale=100, yrange=[0, 100]),
                   v.note("Steady-state share of the flow with the smaller RTT; 50 % is fair.", "001 Fig. 7"),
                   "sweep_share_rtt")


def _sweep_jain_rtt(v: _SweepView) -> list[Fig]:
    d = _two_rtt_runs(v)
    if d.empty:
        return []
    d = d.assign(facet=d["rate_mbps"].map(lambda x: f"{x:g} Mbit/s"))
    return _figure("Jain's fairness index vs RTT ratio",
                   _line_fig(d, "rtt_ratio", "jain_steady", "facet", "line", "RTT ratio (long / short)",
                             "Jain's index (steady state)", yrange=[0, 1.05]),
                   v.note("One panel per bottleneck rate.", "001 Fig. 8"), "sweep_jain_rtt")


def _sweep_util_loss(v: _SweepView) -> list[Fig]:
    runs = v.runs
    if not _varies(runs, "loss_pct"):
        return []
    d = runs.assign(line=runs["algos"] + _suffix(_other_label(runs, {"loss_pct", "buffer_bdp"}), " ({})"),
                    facet=runs["buffer_bdp"].map(lambda x: f"buffer {x:g} BDP"))
    return _figure("Link utilisation vs random loss rate",
                   _line_fig(d, "loss_pct", "utilisation", "facet", "line", "random loss (%)", "utilisation (%)",
                             yscale=100),
                   v.note("Delivered bytes ÷ (link rate × duration).", "001 Fig. 4"), "sweep_util_loss")


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
    return [f for key in swept_keys(v) for f in _swept_key_figures(v, key)]


def _swept_key_figures(v: _SweepView, key: str) -> list[Fig]:
    col = f"matrix.{key}"
    title = AXIS_TITLES.get(key.rsplit(".", 1)[-1], key)
    slug = "".join(c if c.isalnum() else "_" for c in key)
    # not a label: the swept key itself, the link field it sets (rate_mbps for link.rate_mbps), the cc mix
    exclude = {col, key.rsplit(".", 1)[-1]} | {f"matrix.{k}" for k in v.matrix_keys if k.rsplit(".", 1)[-1] == "cc"}
    runs = _bools_as_text(v.runs, col)
    runs = runs.assign(line=runs["algos"] + _suffix(_other_label(runs, exclude), " ({})"), facet="all runs")
    figs: list[Fig] = []
    g = v.matrix_frame(v.groups) if not v.groups.empty else v.groups
    if not g.empty and g.groupby("run_id")["cc"].nunique().max() > 1:
        g = _bools_as_text(g, col)
        g = g.assign(facet=g["algos"] + _suffix(_other_label(g, exclude), " · {}"))
        figs += _figure(f"Throughput share per congestion control vs {title}",
                        _line_fig(g, col, "steady_share", "facet", "cc", title, "% of throughput", yscale=100,
                                  yrange=[0, 100], colors=v.colors),
                        v.note("Steady-state share of each congestion control; one panel per algorithm mix "
                               "and setting of the other swept keys."),
                        f"sweep_share_{slug}")
    if (runs["flows"] > 1).any():
        figs += _figure(f"Jain's fairness index vs {title}",
                        _line_fig(runs[runs["flows"] > 1], col, "jain_steady", "facet", "line", title,
                                  "Jain's index (steady state)", yrange=[0, 1.05], colors=v.colors),
                        v.note("One line per algorithm mix."), f"sweep_jain_{slug}")
    figs += _figure(f"Link utilisation vs {title}",
                    _line_fig(runs, col, "utilisation", "facet", "line", title, "utilisation (%)", yscale=100,
                              colors=v.colors),
                    v.note("Payload delivered while a flow was active ÷ what the link carries."),
                    f"sweep_util_{slug}")
    figs += _figure(f"Mean queueing delay vs {title}",
                    _line_fig(runs, col, "mean_queue_delay_ms", "facet", "line", title, "ms", colors=v.colors),
                    v.note("Bottleneck backlog ÷ link rate, averaged over the steady state."),
                    f"sweep_qdelay_{slug}")
    return figs


def _sweep_throughput_delay(v: _SweepView) -> list[Fig]:
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


def throughput_table(summary: Summary) -> pd.DataFrame:
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


# ---------------------------------------------------------------------------------------------
# Lines of means with their CIs, one panel per facet
# ---------------------------------------------------------------------------------------------


def _varies(df: pd.DataFrame, col: str) -> bool:
    return col in df and df[col].dropna().nunique() > 1


def _suffix(labels: pd.Series, template: str) -> pd.Series:
    """Each non-empty label in `template` (" ({})"), an empty one as nothing."""
    return labels.map(lambda s: template.format(s) if s else "")


def _bools_as_text(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """A copy with True/False in `col` as text (an axis of on/off, not of 1/0)."""
    return df.assign(**{col: df[col].map(lambda x: str(x) if isinstance(x, bool) else x)})


def _other_label(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
    """A label of the remaining varying parameters (so lines never silently mix conditions)."""
    cand = list(LINK_SETTINGS) + [c for c in df.columns if c.startswith("matrix.")]
    cols = [c for c in cand if c not in exclude and _varies(df, c)]
    # matrix keys that merely restate a link field are covered by that field.
    cols = [c for c in cols if not (c.startswith("matrix.") and any(
        c[7:] in (lf, lf.replace("_ms", "").replace("_pct", "").replace("_bdp", "")) for lf in LINK_SETTINGS))]
    if not cols:
        return pd.Series("", index=df.index)
    return df[cols].astype(str).apply(lambda r: ", ".join(f"{c.replace('matrix.', '')}={v}"
                                                          for c, v in r.items()), axis=1)


def _mean_ci(df: pd.DataFrame, by: list[str], y: str) -> pd.DataFrame:
    rows = []
    for k, g in df.groupby(by, dropna=False, sort=True):
        mean, ci, n = stats.mean_ci95(pd.to_numeric(g[y], errors="coerce"))
        rows.append(dict(zip(by, k if isinstance(k, tuple) else (k,), strict=True), mean=mean, ci=ci, n=n))
    return pd.DataFrame(rows)


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


def _numeric(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _line_colors(lines: list, colors: CCColors | None) -> dict:
    """Line label -> colour: a label naming a cc (first word) takes the cc's colour (lines of one cc
    in shades of it); other labels (an RTT, a rate) take the sequential scale no cc uses."""
    colors = colors or CCColors()
    ccs = [str(lv).split(" ", 1)[0] for lv in lines]
    if all(colors.knows(cc) for cc in ccs):
        return {lv: colors.shade(cc, [c for c in ccs[:i]].count(cc), ccs.count(cc))
                for i, (lv, cc) in enumerate(zip(lines, ccs, strict=True))}
    return {lv: sequential(i, len(lines)) for i, lv in enumerate(lines)}


def _plotted(df: pd.DataFrame, x: str, y: str, facet: str) -> pd.DataFrame:
    """The rows with a `y`, in panels where `x` takes two values or more; an `x` of other than
    numbers becomes categories in the order the rows give them (the matrix's order)."""
    df = df[df[y].notna()] if y in df else df
    if df.empty:
        return df
    if not _numeric(df[x]):
        order = list(dict.fromkeys(df[x].astype(str)))
        df = df.assign(**{x: pd.Categorical(df[x].astype(str), categories=order, ordered=True)})
    nx = df.groupby(facet, observed=True)[x].nunique()
    return df[df[facet].isin(nx[nx >= 2].index)]


def _line_fig(df: pd.DataFrame, x: str, y: str, facet: str, line: str, xtitle: str, ytitle: str,
              yscale: float = 1.0, band: tuple[str, str] | None = None, yrange: list[float] | None = None,
              colors: CCColors | None = None) -> go.Figure | None:
    """Mean +- 95 % CI of `y` vs `x`: one panel per `facet` value (wrapped), one line per `line`,
    with a shaded band between the means of the two `band` columns. `x` may be numbers (a line) or
    categories (an aqm, ecn on/off: points joined in the matrix's order).

    Panels where `x` takes fewer than two values are left out (nothing to plot against); None
    when no panel remains.
    """
    df = _plotted(df, x, y, facet)
    if df.empty:
        return None
    facets = list(dict.fromkeys(df[facet]))
    ncols = min(MAX_FACET_COLS, len(facets))
    nrows = -(-len(facets) // ncols)
    fig = make_subplots(rows=nrows, cols=ncols, shared_yaxes=True, subplot_titles=[str(f) for f in facets],
                        horizontal_spacing=0.03, vertical_spacing=0.18 / nrows + 0.05)
    line_color = _line_colors(list(dict.fromkeys(df[line])), colors)
    categorical = isinstance(df[x].dtype, pd.CategoricalDtype)
    shown = set()
    for fi, fv in enumerate(facets):
        row, col = fi // ncols + 1, fi % ncols + 1
        for lv, color in line_color.items():
            d = df[(df[facet] == fv) & (df[line] == lv)]
            if d.empty:
                continue
            for trace in _mean_traces(d, x, y, yscale, band, categorical, str(lv), color, lv not in shown):
                fig.add_trace(trace, row=row, col=col)
            shown.add(lv)
        fig.update_xaxes(title_text=xtitle if row == nrows or fi + ncols >= len(facets) else None,
                         type="category" if categorical else None, row=row, col=col)
    for r in range(1, nrows + 1):
        fig.update_yaxes(title_text=ytitle, row=r, col=1)
    if yrange:
        fig.update_yaxes(range=yrange)
    fig.update_annotations(font_size=12)
    fig.update_layout(height=120 + 290 * nrows, margin=dict(l=60, r=20, t=40, b=50),
                      legend=dict(orientation="h", y=-0.08 - 0.3 / (nrows + 1), x=0), hovermode="closest")
    return fig


def _mean_traces(d: pd.DataFrame, x: str, y: str, yscale: float, band: tuple[str, str] | None,
                 categorical: bool, name: str, color: str, showlegend: bool) -> list[go.Scatter]:
    """One line of a panel: the mean of `y` at each `x` with its CI as error bars, under it the band."""
    agg = _mean_ci(d, [x], y).sort_values(x)
    agg = agg[agg["n"] > 0]
    xs = agg[x].astype(str).to_numpy() if categorical else agg[x].to_numpy(float)
    traces = []
    if band:
        lo, hi = (d.groupby(x, observed=True)[b].mean().reindex(agg[x]).to_numpy(float) * yscale for b in band)
        traces += [go.Scatter(x=xs, y=hi, mode="lines", line=dict(width=0.6, color=color),
                              showlegend=False, legendgroup=name, hoverinfo="skip"),
                   go.Scatter(x=xs, y=lo, mode="lines", line=dict(width=0.6, color=color), fill="tonexty",
                              fillcolor=_rgba(color, 0.18), showlegend=False, legendgroup=name, hoverinfo="skip")]
    traces.append(go.Scatter(
        x=xs, y=agg["mean"].to_numpy(float) * yscale, mode="lines+markers", name=name,
        legendgroup=name, showlegend=showlegend, line=dict(color=color, width=2),
        customdata=agg["n"].to_numpy(), hovertemplate="%{y:.3g} (n=%{customdata})",
        error_y=dict(type="data", array=(agg["ci"].fillna(0) * yscale).to_numpy(float), visible=True,
                     thickness=1)))
    return traces
