"""The report as a reader sees it, in headless Chromium at 1280 px: no table runs past the window,
and a congestion control has one colour in every figure of a page (each flow of it one shade,
the same in every figure); every per-run time axis starts at the first flow's start."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cctest.cli.report import report_command
from tests import REPO
from tests.browser import CHROMEDRIVER, CHROMIUM, MISSING, headless_chromium
from tests.report_fixtures import FlowSpec, RunSpec, make_run, make_sweep

FIXTURES = REPO / "tests" / "fixtures" / "runs"
DEMO = FIXTURES / "demo-cubic-bbr-20261122-232527-base-r0"
WIDTH = 1280

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)

RENDERED_JS = """
return Array.from(document.querySelectorAll('div.fig')).every(function(d){ return !!d.data; });
"""
TABLES_JS = """
var width = document.documentElement.clientWidth;
return {width: width, scroll: document.documentElement.scrollWidth,
        tables: Array.from(document.querySelectorAll('table')).map(function(t){
          var r = t.getBoundingClientRect();
          var box = t.parentElement.getBoundingClientRect();
          return {right: r.right, parent_right: box.right, scroll: t.scrollWidth, client: t.clientWidth,
                  head: t.querySelector('th') ? t.querySelector('tr').innerText.slice(0, 80) : ''};
        })};
"""
TRACES_JS = """
return Array.from(document.querySelectorAll('div.fig')).map(function(d){
  var lay = d.layout || {};
  return {key: d.dataset.key, range: (lay.xaxis && lay.xaxis.range) || null,
          traces: (d.data || []).map(function(t){
            return {name: t.name || '',
                    color: (t.line && t.line.color) || (t.marker && t.marker.color) || t.fillcolor || null};
          })};
});
"""


def _render(path: Path, tmp_path: Path):
    pytest.importorskip("selenium", reason="selenium not installed (pip install selenium)")
    drv = headless_chromium(tmp_path / "profile", WIDTH, 900, extra_args=("--hide-scrollbars",))
    drv.get(path.resolve().as_uri())
    drv.execute_script("return window.cctestRenderAll();")
    deadline = time.time() + 90
    while not drv.execute_script(RENDERED_JS) and time.time() < deadline:
        time.sleep(0.5)
    return drv


@pytest.fixture(scope="module")
def all_runs_page(tmp_path_factory):
    """Every recorded fixture run, one of them with claims (the claims table is the widest)."""
    root = tmp_path_factory.mktemp("layout")
    for run in FIXTURES.iterdir():
        if run.is_dir():
            shutil.copytree(run, root / "runs" / run.name)
    demo = root / "runs" / DEMO.name
    resolved = yaml.safe_load((demo / "scenario.yaml").read_text())
    resolved["expect"] = [{"claim": "share(cubic) > 0.01", "source": "a long source text, 000 Fig. 13a and Table 2",
                           "note": "a note long enough to need wrapping: the claim is judged on a single "
                                   "repetition here, so its verdict is the value's side of the bound"}]
    (demo / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    # a sweep with repetitions (the repetitions and 1 s interval tables) and a run of six flows
    make_sweep(root / "runs" / "sweep", buffers=(0.5, 2), rtts=(10,), pairs=(("bbr_cws", "cubic"),), reps=2)
    make_run(root / "runs" / "six", RunSpec(scenario="six-flows-with-a-long-scenario-name", duration_s=12,
                                            flows=[FlowSpec(cc, rtt) for cc in ("bbr3", "cubic")
                                                   for rtt in (10, 20, 40)]))
    out = root / "all.html"
    res = CliRunner().invoke(report_command, [str(root / "runs"), "-o", str(out), "--no-fail"])
    assert res.exit_code == 0, res.output
    return out


def test_no_table_overflows_a_1280_px_window(all_runs_page, tmp_path):
    drv = _render(all_runs_page, tmp_path)
    try:
        got = drv.execute_script(TABLES_JS)
    finally:
        drv.quit()
    assert got["width"] <= WIDTH and len(got["tables"]) > 20
    wide = [t for t in got["tables"] if t["right"] > got["width"] + 0.5 or t["scroll"] > t["client"] + 1]
    assert not wide, f"{len(wide)} of {len(got['tables'])} tables overflow: {wide[:3]}"
    assert got["scroll"] <= got["width"], "the page scrolls sideways"


def _color_key(name: str, ccs: set[str]):
    match = re.match(r"flow (\d+) · (\w+)", name)
    if match:
        return ("flow", int(match[1]), match[2])
    if name in ccs:
        return ("cc", name)
    return None


def test_a_cc_has_one_colour_in_every_figure_of_the_demo_report(tmp_path):
    out = tmp_path / "demo.html"
    res = CliRunner().invoke(report_command, [str(DEMO), "-o", str(out)])
    assert res.exit_code == 0, res.output
    drv = _render(out, tmp_path)
    try:
        figs = drv.execute_script(TRACES_JS)
    finally:
        drv.quit()
    ccs = {"cubic", "bbr"}
    seen: dict[tuple, dict[str, set[str]]] = {}
    for fig in figs:
        for trace in fig["traces"]:
            key = _color_key(trace["name"].split(" (")[0].split(":")[0].replace(" min_rtt", ""), ccs)
            if key:
                assert trace["color"], f"{fig['key']}: {trace['name']} takes the template's colour"
                seen.setdefault(key, {}).setdefault(trace["color"], set()).add(fig["key"])
    flows = {k for k in seen if k[0] == "flow"}
    assert {k[2] for k in flows} == ccs and ("cc", "cubic") in seen
    figures_with_flows = {f for k in flows for figs_ in seen[k].values() for f in figs_}
    assert len(figures_with_flows) >= 5, figures_with_flows
    for key, colors in seen.items():
        assert len(colors) == 1, f"{key} has {len(colors)} colours: {colors}"
    # one flow per cc here: each flow is in its cc's own colour, and the two ccs differ
    color = {key: next(iter(c)) for key, c in seen.items()}
    for _, flow, cc in flows:
        assert color[("flow", flow, cc)] == color[("cc", cc)]
    assert color[("cc", "cubic")] != color[("cc", "bbr")]
    for fig in figs:
        if fig["range"] is not None and not fig["key"].startswith("sweep"):
            assert fig["range"][0] == pytest.approx(0), f"{fig['key']} starts at {fig['range'][0]} s"
