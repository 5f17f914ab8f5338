"""One colour per congestion control on a whole page (every figure of every run and the across-runs
figures), the flows of one cc in shades of it; ordered quantities (an RTT, a rate) in a sequential
scale that no cc uses, so a line's colour never means two things on one page."""

from __future__ import annotations

import colorsys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.record import RunRecord

# Fixed where known, so that pages side by side agree too; colour-blind-safe first (Okabe-Ito-like).
FIXED = {
    "cubic": "#0072b2", "bbr": "#d55e00", "bbr3": "#009e73", "bbr1": "#cc79a7", "reno": "#56b4e9",
    "bbr_cws": "#7b3294", "bbr_modest": "#8c510a", "bbr3plus": "#e69f00", "bbr_acw": "#1b7837",
    "bbr_shallow": "#b2182b", "bbr_histmin": "#4d4d4d", "htcp": "#999933", "vegas": "#882255",
    "westwood": "#44aa99", "dctcp": "#332288", "bic": "#aa4499", "illinois": "#117733",
}
SPARE = ["#ddcc77", "#88ccee", "#661100", "#6699cc", "#aa4466", "#888888", "#117777", "#774411"]
# Ordered values (RTTs, rates, buffers) in a sequential scale: light to dark teal-grey, unlike any cc.
SEQUENTIAL = ["#9fb3c8", "#7c94ae", "#5f7894", "#455e7a", "#2f4660", "#1c3047", "#0d1b2e"]


class CCColors:
    """cc -> colour for one page; a cc the table does not know gets a spare colour, in first-seen order."""

    def __init__(self, ccs: Iterable[str] = ()) -> None:
        self.colors: dict[str, str] = {}
        for cc in ccs:
            self.of(cc)

    def of(self, cc: str) -> str:
        cc = str(cc)
        if cc not in self.colors:
            used = set(self.colors.values())
            spare = [c for c in SPARE if c not in used]
            self.colors[cc] = FIXED.get(cc) or (spare[0] if spare else SPARE[len(self.colors) % len(SPARE)])
        return self.colors[cc]

    def knows(self, cc: str) -> bool:
        return str(cc) in self.colors or str(cc) in FIXED

    def shade(self, cc: str, k: int, n: int) -> str:
        """The k-th (0-based) of n flows of `cc`: the cc's colour, lighter or darker by flow."""
        return shade(self.of(cc), k, n)


def shade(hex_color: str, k: int, n: int) -> str:
    if n <= 1:
        return hex_color
    r, g, b = (int(hex_color.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4))
    h, lum, s = colorsys.rgb_to_hls(r, g, b)
    # spread the lightness over +-0.22 around the cc's own, darkest first
    step = 0.44 / (n - 1)
    lum = min(0.85, max(0.12, lum - 0.22 + k * step))
    r, g, b = colorsys.hls_to_rgb(h, lum, s)
    return "#" + "".join(f"{round(255 * c):02x}" for c in (r, g, b))


def sequential(k: int, n: int) -> str:
    if n <= 1:
        return SEQUENTIAL[len(SEQUENTIAL) // 2]
    return SEQUENTIAL[round(k * (len(SEQUENTIAL) - 1) / (n - 1))]


def flow_ccs(record: RunRecord) -> list[str]:
    return [str(f.cc) for f in record.flows or []]
