"""The figure helper shared by the run and sweep figures: a titled figure for the page (`Fig`),
plotly figures built as plain dicts (`DFig`), and long traces decimated for display.

Figures are plain plotly figures; the page (html.py) serialises them once and renders them lazily.
Long traces are decimated for display only (min/max per bucket, so spikes survive); metrics are
computed from all samples in cctest.analysis.metrics. Traces with many points use Scattergl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

GL_THRESHOLD = 6000  # a figure with more displayed points than this uses WebGL traces


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

    def __init__(self, data: Iterable[dict] | None = None, rows: int = 1, row_heights: Sequence[float] | None = None,
                 vertical_spacing: float = 0.08, subplot_titles: Sequence[str] | None = None) -> None:
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

    def add_trace(self, trace: dict, row: int = 1, col: int = 1) -> DFig:
        if row > 1:
            trace = dict(trace, xaxis=self._ref("x", row), yaxis=self._ref("y", row))
        self.data.append(trace)
        return self

    def _axes(self, kind: str, row: int | None) -> list[dict]:
        rows = [row] if row else range(1, self.rows + 1)
        return [self.layout[self._ax(kind, i)] for i in rows]

    def _update_axes(self, kind: str, row: int | None = None, col: int | None = None, title_text: str | None = None,
                     **kw: Any) -> DFig:
        for ax in self._axes(kind, row):
            if title_text is not None:
                ax["title"] = {"text": title_text}
            ax.update({k: v for k, v in kw.items() if v is not None})
        return self

    def update_xaxes(self, row: int | None = None, col: int | None = None, **kw: Any) -> DFig:
        return self._update_axes("x", row, col, **kw)

    def update_yaxes(self, row: int | None = None, col: int | None = None, **kw: Any) -> DFig:
        return self._update_axes("y", row, col, **kw)

    def update_layout(self, **kw: Any) -> DFig:
        self.layout.update(kw)
        return self

    def add_hline(self, y: float, line: dict | None = None, annotation_text: str | None = None,
                  annotation_position: str = "top right") -> DFig:
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

    def add_vrect(self, x0: float, x1: float, fillcolor: str = "#888", opacity: float = 0.1, line_width: float = 0,
                  annotation_text: str | None = None) -> DFig:
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


@dataclass(eq=False)
class Fig:
    """A titled figure for the page; `note` is shown under it, `key` names it (page anchors, exports)."""

    title: str
    fig: DFig | go.Figure
    note: str = ""
    key: str = ""


def layout(fig: DFig, ytitle: str = "", xtitle: str = "time (s)", height: int = 340) -> DFig:
    """A run figure's size, margins and legend (below the plot, two names a row) and its axis titles."""
    named = sum(1 for t in fig.data if t.get("showlegend", True))
    legend_rows = -(-named // 2)
    fig.update_layout(height=height + 20 * legend_rows, margin=dict(l=60, r=20, t=30, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-60 / height, x=0, font=dict(size=11)),
                      hovermode="x unified")
    fig.update_xaxes(title_text=xtitle)
    if ytitle:
        fig.update_yaxes(title_text=ytitle)
    return fig


def lines(traces: list[dict], max_points: int, shape: str | None = None) -> list[dict]:
    """Line traces, each decimated to max_points, WebGL when they are long together. `traces`: dicts
    with x, y, name, color, and optional dash/width/legendgroup/showlegend/mode."""
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

