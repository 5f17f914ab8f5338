"""`cctest report --figures DIR --format svg|pdf`: every figure of the page as a vector file for a
paper, rendered by plotly's own exporter (kaleido) in the Chromium the system has installed.

Nothing is downloaded: kaleido is never asked to fetch a browser. Without kaleido (the `export`
extra) or without a Chromium on the system the command says so in one line and what to install.
Files: DIR/<run id>/<figure>.<fmt> for each run's figures, DIR/across-runs/<figure>.<fmt> for the
across-runs figures; the page's colours and titles, on a white template, at a fixed size."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import CctestError

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from .figure import DFig, Fig

FORMATS = ("svg", "pdf")
WIDTH_PX = 900  # a two-column figure at 300 dpi is about this wide in CSS pixels
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


class ExportError(CctestError):
    """Figure export cannot run here (no kaleido, no browser) or failed."""


def _slug(text: str) -> str:
    """A file or folder name from a run id or a figure's title: never a path (`..`, `/`) nor hidden."""
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", str(text)).strip("._")[:120] or "figure"


def _browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def printable(fig: DFig | go.Figure, title: str) -> dict:
    """A page figure as a plain plotly dict for a file: WebGL traces as SVG ones (a vector file
    cannot hold WebGL), the white template, the figure's title on it."""
    d = copy.deepcopy(fig.to_plotly_json())
    for trace in d.get("data", []):
        if trace.get("type") == "scattergl":
            trace["type"] = "scatter"
    layout = d.setdefault("layout", {})
    layout.pop("template", None)
    layout["template"] = "plotly_white"
    layout["title"] = {"text": title, "x": 0.01, "font": {"size": 14}}
    margin = dict(layout.get("margin") or {})
    margin["t"] = max(int(margin.get("t") or 0), 50)
    layout["margin"] = margin
    return d


def check_available(fmt: str) -> None:
    """Raise ExportError unless figures can be exported here (checked before anything is written)."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt}: allowed: {', '.join(FORMATS)}")
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ExportError("--figures needs kaleido, plotly's figure exporter: pip install 'cctest[export]' "
                          "(or pip install kaleido)") from None
    if _browser() is None:
        raise ExportError("--figures renders with the system's Chromium and none was found: install it "
                          "(Debian/Ubuntu: apt-get install chromium); cctest never downloads a browser")


def export_figures(figures: list[tuple[str, Fig]], out_dir: Path, fmt: str) -> list[Path]:
    """Write each (scope, Fig) as out_dir/<scope>/<key>.<fmt>; return the paths written."""
    check_available(fmt)
    import plotly.io as pio
    paths, dicts, seen = [], [], set()
    for scope, f in figures:
        name = _slug(f.key or f.title)
        path = Path(out_dir) / _slug(scope) / f"{name}.{fmt}"
        n = 2
        while path in seen:  # two figures of one key in one scope (never expected): keep both
            path = path.with_name(f"{name}-{n}.{fmt}")
            n += 1
        seen.add(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.append(path)
        dicts.append(printable(f.fig, f.title))
    if not paths:
        return []
    heights = [int((d.get("layout") or {}).get("height") or 450) + 40 for d in dicts]
    try:
        pio.write_images(dicts, paths, format=fmt, width=WIDTH_PX, height=heights, validate=False)
    except Exception as error:
        raise ExportError(f"figure export to {out_dir} failed: {type(error).__name__}: {error}") from error
    return paths
