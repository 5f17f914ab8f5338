"""The self-contained HTML page: plotly.js embedded once, figures as JSON rendered lazily
(when scrolled into view or when their run's section is opened), so pages with many runs stay
responsive. No network access is ever needed to view it."""

from __future__ import annotations

import base64
import html
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from ..base.jsonsafe import json_safe
from .figure import Fig

if TYPE_CHECKING:
    from collections.abc import Sequence

CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#23395b;color:#fff;padding:14px 28px}
header h1{margin:0;font-size:22px} header .sub{opacity:.85;font-size:13px;margin-top:4px}
main{padding:10px 28px 60px;max-width:1500px}
h2{border-bottom:2px solid #23395b;padding-bottom:4px;margin-top:34px}
h3{margin:22px 0 6px;font-size:16px}
nav{font-size:13px;margin:10px 0} nav a{margin-right:14px}
table{border-collapse:collapse;font-size:12px;margin:6px 0 14px;background:#fff;max-width:100%}
th,td{border:1px solid #ddd;padding:3px 5px;text-align:right;white-space:nowrap}
th{background:#eef1f6;position:sticky;top:0;white-space:normal;vertical-align:bottom} td.l,th.l{text-align:left}
td.l{white-space:normal;overflow-wrap:anywhere;min-width:3em}
.fig{background:#fff;border:1px solid #e3e3e3;border-radius:4px;margin:8px 0 2px;min-height:300px}
.note{font-size:12px;color:#555;margin:0 0 16px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(560px,100%),1fr));gap:0 18px}
.grid>div{min-width:0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
.pass{background:#2e7d32}.warn{background:#ef6c00}.fail{background:#c62828}.unknown{background:#777}
.wall{background:#6a1b9a} tr.wallclock td{background:#f3e5f5}
details.yaml{font-size:12px;margin:2px 0 8px} details.yaml pre{background:#f6f8fa;padding:6px;overflow:auto;max-height:320px}
.reg{background:#fde0e0}.ok{color:#2e7d32}.bad{color:#c62828;font-weight:600}
details.run{background:#fff;border:1px solid #ddd;border-radius:4px;margin:10px 0;padding:4px 12px}
details.run>summary{cursor:pointer;font-weight:600;padding:6px 0}
ul.notes{font-size:12.5px;color:#8a4b00;margin:4px 0}
.kv{font-size:12.5px;color:#333} .kv b{color:#000}
"""  # noqa: E501 - the stylesheet as the reports carry it

JS = """
(function(){
  var FIGS = JSON.parse(document.getElementById('cctest-figs').textContent);
  var TEMPLATE = JSON.parse(document.getElementById('cctest-template').textContent);
  var CONFIG = {responsive:true, displaylogo:false};
  function render(div){
    if(div.dataset.rendered) return;
    div.dataset.rendered = '1';
    var f = FIGS[+div.dataset.fig];
    f.layout.template = TEMPLATE;
    Plotly.newPlot(div, f.data, f.layout, CONFIG);
  }
  window.cctestRenderAll = function(){
    document.querySelectorAll('details.run').forEach(function(d){ d.open = true; });
    document.querySelectorAll('div.fig').forEach(render);
    return document.querySelectorAll('div.fig').length;
  };
  var io = ('IntersectionObserver' in window) ? new IntersectionObserver(function(es){
    es.forEach(function(e){ if(e.isIntersecting){ render(e.target); io.unobserve(e.target); } });
  }, {rootMargin:'400px'}) : null;
  document.querySelectorAll('div.fig').forEach(function(d){ io ? io.observe(d) : render(d); });
  document.querySelectorAll('details.run').forEach(function(det){
    det.addEventListener('toggle', function(){
      if(det.open) det.querySelectorAll('div.fig').forEach(function(d){
        if(d.dataset.rendered) Plotly.Plots.resize(d);
      });
    });
  });
})();
"""


_DTYPES = {"f": "f4", "i": "i4", "u": "u4", "b": "u1"}


def _encode(o: object) -> object:
    """JSON-ready copy of a figure: numeric numpy arrays become plotly.js typed arrays
    ({dtype, bdata: base64}), NaN/inf become null, pandas/numpy containers become lists."""
    if isinstance(o, dict):
        return {k: _encode(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_encode(v) for v in o]
    if isinstance(o, pd.Series | pd.Index):
        o = o.to_numpy()
    if isinstance(o, np.ndarray):
        kind = o.dtype.kind
        if kind in _DTYPES and o.ndim == 1:
            if kind == "f" and not np.all(np.isfinite(o)):
                return json_safe(o.astype(float).tolist())
            a = o.astype({"f": np.float32, "i": np.int32, "u": np.uint32, "b": np.uint8}[kind])
            return {"dtype": _DTYPES[kind], "bdata": base64.b64encode(a.tobytes()).decode("ascii")}
        return _encode(o.tolist())
    return json_safe(o)


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int,)) and not isinstance(v, bool):
        return f"{v:,}"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return esc(v)
    if math.isnan(f):
        return "–"
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    if f == int(f) and abs(f) < 1e15:
        return f"{int(f):,}"
    if abs(f) >= 100:
        return f"{f:,.1f}"
    if abs(f) >= 1:
        t = f"{f:.{digits}f}"
        return t.rstrip("0").rstrip(".") if "." in t else t
    return f"{f:.{digits}g}"


def fmt_ci(mean: Any, ci: Any) -> str:
    """'mean ± half-width', both to the half-width's precision (two significant digits): never
    '1.002 ± 9.55e-16'. A half-width below a millionth of the mean is no spread: '± 0'."""
    try:
        m, c = float(mean), float(ci)
    except (TypeError, ValueError):
        return fmt(mean)
    if math.isnan(m):
        return "–"
    if math.isnan(c):
        return fmt(m)
    if c <= 1e-6 * max(abs(m), 1e-12):
        return f"{fmt(m)} ± 0"
    decimals = max(0, 1 - math.floor(math.log10(c)))  # two significant digits of the half-width
    if decimals > 6:
        return f"{m:.3g} ± {c:.2g}"
    return f"{m:,.{decimals}f} ± {c:,.{decimals}f}"


def table(df: pd.DataFrame, left: set[str] | None = None, cls_rows: Sequence[str] | None = None,
          headers: dict | None = None) -> str:
    if df is None or df.empty:
        return "<p class='note'>(no rows)</p>"
    left = left or set()
    headers = headers or {}
    out = ["<table><thead><tr>"]
    for c in df.columns:
        out.append(f"<th class='{'l' if c in left else ''}'>{esc(headers.get(c, c))}</th>")
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(df.itertuples(index=False)):
        rc = cls_rows[i] if cls_rows is not None else ""
        out.append(f"<tr class='{rc}'>")
        for c, v in zip(df.columns, row, strict=True):
            cell = esc(v) if c in left else fmt(v)
            out.append(f"<td class='{'l' if c in left else ''}'>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


class Page:
    def __init__(self, title: str, subtitle: str = "") -> None:
        self.title, self.subtitle = title, subtitle
        self.parts: list[str] = []
        self.figs: list[str] = []
        self.toc: list[tuple[str, str]] = []
        self.scope = "page"  # whose figures are being added (a run's id, across-runs): names exported files
        self.fig_objects: list[tuple[str, Fig]] = []

    def h2(self, text: str, anchor: str) -> None:
        self.toc.append((anchor, text))
        self.parts.append(f"<h2 id='{esc(anchor)}'>{esc(text)}</h2>")

    def add(self, raw_html: str) -> None:
        self.parts.append(raw_html)

    def fig_html(self, f: Fig) -> str:
        self.fig_objects.append((self.scope, f))
        d = f.fig.to_plotly_json()
        d.get("layout", {}).pop("template", None)
        self.figs.append(json.dumps(_encode({"data": d.get("data", []), "layout": d.get("layout", {})}),
                                    separators=(",", ":"), allow_nan=False))
        i = len(self.figs) - 1
        note = f"<p class='note'>{esc(f.note)}</p>" if f.note else ""
        return (f"<div><h3>{esc(f.title)}</h3><div class='fig' data-fig='{i}' "
                f"data-key='{esc(f.key)}'></div>{note}</div>")

    def render(self) -> str:
        template = pio.json.to_json_plotly(pio.templates["plotly_white"].to_plotly_json())
        figs = "[" + ",".join(self.figs) + "]"
        nav = "".join(f"<a href='#{esc(a)}'>{esc(t)}</a>" for a, t in self.toc)
        safe = lambda s: s.replace("<", "\\u003c")  # noqa: E731  (no '</script>' or '<!--' inside JSON)
        return (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{esc(self.title)}</title><meta name='viewport' content='width=device-width'>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<header><h1>{esc(self.title)}</h1><div class='sub'>{esc(self.subtitle)}</div></header>"
            f"<main><nav>{nav}</nav>{''.join(self.parts)}</main>"
            f"<script type='application/json' id='cctest-template'>{safe(template)}</script>"
            f"<script type='application/json' id='cctest-figs'>{safe(figs)}</script>"
            f"<script>{JS}</script></body></html>")
