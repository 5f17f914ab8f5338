"""The side-by-side heatmap: the testbed's gains and ours, one panel each, on one colour scale.

Rows of panels are the buffers, columns the testbed and then each engine that measured a cell; in a
panel, x is the rate and y the RTT, as the paper's Fig. 5. The scale is diverging around 0 (BBR
better: red, CUBIC better: blue) and symmetric, so one colour means one gain in every panel. A
cell without runs is left blank and labelled "not run".

`write` renders an svg with plotly's own exporter (kaleido, in the system's Chromium: nothing is
downloaded); where that cannot run it writes a self-contained HTML file instead and says why.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from .gains import CellResult
from .testbed import Cell, buffer_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

COLORSCALE = "RdBu_r"  # blue below 0 (CUBIC ahead), red above (BBR ahead)
MIN_RANGE = 10.0  # percentage points: a table of small gains is not painted as extremes
PANEL_PX = (330, 300)  # width, height of one panel


def signed(value: float) -> str:
    """A gain as a cell shows it: whole points with their sign, 0 without one."""
    if not math.isfinite(value):
        return "not run"
    return "0" if round(value) == 0 else f"{value:+.0f}"


def figure(testbed: dict[Cell, float], results: list[CellResult], engines: list[str]) -> go.Figure:
    """A plotly Figure: one row per buffer, columns testbed + `engines`."""
    from plotly.subplots import make_subplots

    buffers = sorted({c.buffer_bytes for c in testbed})
    rates = sorted({c.rate_mbps for c in testbed})
    rtts = sorted({c.rtt_ms for c in testbed})
    sources = ["testbed", *engines]
    ours = {(r.cell, r.engine): r.mean_ci[0] for r in results if r.n}
    values = [v for v in testbed.values()] + [v for v in ours.values() if math.isfinite(v)]
    limit = max(MIN_RANGE, max((abs(v) for v in values), default=0.0))
    titles = [f"{'testbed (Cao et al. 2019)' if s == 'testbed' else 'cctest, ' + s} · {buffer_text(b)}"
              for b in buffers for s in sources]
    fig = make_subplots(rows=len(buffers), cols=len(sources), subplot_titles=titles,
                        horizontal_spacing=0.06, vertical_spacing=0.12)
    for row, buffer in enumerate(buffers, start=1):
        for col, source in enumerate(sources, start=1):
            z, text = [], []
            for rtt in rtts:
                cells = [Cell(buffer, rate, rtt) for rate in rates]
                got = [testbed.get(c, math.nan) if source == "testbed" else ours.get((c, source), math.nan)
                       for c in cells]
                z.append([v if math.isfinite(v) else None for v in got])
                text.append([signed(v) for v in got])
            fig.add_trace(dict(type="heatmap", x=[f"{r:g}" for r in rates], y=[f"{t:g}" for t in rtts], z=z,
                               text=text, texttemplate="%{text}", coloraxis="coloraxis",
                               hovertemplate=f"{source}<br>%{{x}} Mbit/s, %{{y}} ms: %{{text}} %<extra></extra>"),
                          row=row, col=col)
            fig.update_xaxes(title_text="rate (Mbit/s)", type="category", row=row, col=col)
            fig.update_yaxes(title_text="RTT (ms)" if col == 1 else None, type="category", row=row, col=col)
    fig.update_layout(
        coloraxis=dict(colorscale=COLORSCALE, cmin=-limit, cmax=limit, cmid=0,
                       colorbar=dict(title=dict(text="BBR's goodput<br>gain over<br>CUBIC (%)"))),
        width=PANEL_PX[0] * len(sources) + 140, height=PANEL_PX[1] * len(buffers) + 80,
        margin=dict(l=60, r=20, t=50, b=50), template="plotly_white")
    return fig


def write(fig: go.Figure, path: Path) -> tuple[Path, str]:
    """Write `fig` as an svg at `path`; or, when the exporter cannot run here, as `path` with .html
    and the reason. Returns the file written and the reason ("" for the svg)."""
    from ..report.export import check_available

    try:
        check_available("svg")
        fig.write_image(str(path), format="svg", width=fig.layout.width, height=fig.layout.height)
        return path, ""
    except Exception as error:  # noqa: BLE001 - kaleido's and the browser's failures, in one line
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    html = path.with_suffix(".html")
    fig.write_html(str(html), include_plotlyjs=True, full_html=True)  # plotly.js inline: no network
    return html, reason
