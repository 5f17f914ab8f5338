"""What the report tells a reader: where each run came from (clock, code, seed, bottleneck, its
scenario), across-runs figures for any swept key that leave failed-health runs out and say so,
readable module state, time axes from the first flow's start, and numbers printed sanely."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cctest.cli.report import report_command
from cctest.report.colors import FIXED, CCColors, shade
from cctest.report.html import fmt_ci
from tests import REPO
from tests.report_fixtures import FlowSpec, RunSpec, make_run

FIXTURES = REPO / "tests" / "fixtures" / "runs"
WALL = FIXTURES / "wallclock-three-v-three-20261122-232144-ratembps-20.0-r0"
DEMO = FIXTURES / "demo-cubic-bbr-20261122-232527-base-r0"


def decoded(values):
    """A figure array as the page holds it: a list, or a plotly.js typed array {dtype, bdata}."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"])).tolist()
    return values


def report(tmp_path: Path, *paths, name="r") -> tuple[str, list[dict]]:
    out = tmp_path / f"{name}.html"
    res = CliRunner().invoke(report_command, [*map(str, paths), "-o", str(out), "--no-fail"])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    figs = json.loads(re.search(r"id='cctest-figs'>(.*?)</script>", html, re.S)[1].replace("\\u003c", "<"))
    keys = re.findall(r"data-key='([^']*)'", html)
    for fig, key in zip(figs, keys, strict=True):
        fig["key"] = key
    return html, figs


def test_each_run_says_where_its_numbers_came_from(tmp_path):
    html, _ = report(tmp_path, WALL, DEMO)
    # the wall-clock run is badged and its clock named; the demo's virtual clock and shift too
    assert html.count(">wall clock</span>") == 1
    assert "VM, WALL clock (software emulation: results depend on how busy the host was)" in html
    assert "VM, virtual clock (icount shift 0)" in html
    # the code that ran it, with the dirty flag both fixtures carry
    assert "cctest 0.1.0 @ 840d91c97e69 (dirty tree: uncommitted changes)" in html
    assert "cctest 0.1.0 @ 5ccc70b929b5 (dirty tree" in html
    assert "seed <b>1</b>" in html and "bottleneck <b>fifo</b>" in html
    assert html.count("scenario.yaml (as run)") == 2 and "name: demo" in html
    assert "tr class='wallclock'" in html  # the overview's row of the wall-clock run


def _aqm_and_rate_sweep(root: Path) -> None:
    seed = 10
    for aqm in ("fifo", "fq_codel"):
        for rate in (10, 20, 40):
            for rep in range(2):
                seed += 1
                run = make_run(root, RunSpec(scenario="aqm-rate", rate_mbps=rate, duration_s=12, repetition=rep,
                                             seed=seed, matrix={"link.aqm": aqm, "link.rate_mbps": rate}))
                meta = json.loads((run / "meta.json").read_text())
                meta["link"]["aqm"] = aqm
                (run / "meta.json").write_text(json.dumps(meta))
    make_run(root, RunSpec(scenario="aqm-rate", rate_mbps=10, duration_s=12, repetition=2, seed=99,
                           verdict="fail", matrix={"link.aqm": "fifo", "link.rate_mbps": 10}))


def test_a_sweep_over_any_key_gets_figures_and_failed_health_runs_are_left_out_and_named(tmp_path):
    _aqm_and_rate_sweep(tmp_path / "runs")
    html, figs = report(tmp_path, tmp_path / "runs")
    keys = [f["key"] for f in figs]
    for key in ("link_rate_mbps", "link_aqm"):
        for what in ("share", "jain", "util", "qdelay"):
            assert f"sweep_{what}_{key}" in keys, (what, key)
    assert "Throughput share per congestion control vs bottleneck rate (Mbit/s)" in html
    assert "Link utilisation vs AQM" in html
    assert "sweep_tput_delay" in keys and "Throughput vs delay per flow" in html
    failed = re.search(r"Left out \(emulation health fail\): 1 run\(s\): (\S+)\.", html)
    assert failed and "r2" in failed[1]
    # the failed run is in no line: the 10 Mbit/s fifo point is the mean of the two healthy runs only
    share = next(f for f in figs if f["key"] == "sweep_share_link_rate_mbps")
    counts = [list(decoded(t["customdata"])) for t in share["data"] if "customdata" in t]
    assert counts and all(n == [2, 2, 2] for n in counts), counts
    # the aqm axis is categorical, in the matrix's order; seed figures are not cited for a user's runs
    aqm = next(f for f in figs if f["key"] == "sweep_util_link_aqm")
    assert aqm["layout"]["xaxis"]["type"] == "category"
    assert [t["x"] for t in aqm["data"] if t.get("mode") == "lines+markers"][0] == ["fifo", "fq_codel"]
    assert "Fig." not in " ".join(re.findall(r"<h3>(.*?)</h3>", html))


def test_the_across_runs_figures_colour_each_cc_as_the_runs_do(tmp_path):
    _aqm_and_rate_sweep(tmp_path / "runs")
    _, figs = report(tmp_path, tmp_path / "runs")
    share = next(f for f in figs if f["key"] == "sweep_share_link_rate_mbps")
    colours = {t["name"]: t["line"]["color"] for t in share["data"] if t.get("name") in ("bbr", "cubic")}
    assert colours == {"bbr": FIXED["bbr"], "cubic": FIXED["cubic"]}
    run_share = next(f for f in figs if f["key"] == "group_share")
    assert {t["name"]: t["fillcolor"] for t in run_share["data"]} == colours


def test_module_state_in_readable_units_and_mode_names_for_v1_variants(tmp_path):
    run = make_run(tmp_path / "runs", RunSpec(scenario="v1", duration_s=12,
                                               flows=[FlowSpec("bbr_cws", 10), FlowSpec("bbr_cws", 10),
                                                      FlowSpec("cubic", 10)]))
    html, figs = report(tmp_path, run)
    state = next(f for f in figs if f["key"] == "cc_state")
    titles = [a["text"] for a in state["layout"]["annotations"]]
    assert not any(t.endswith(("_bps", "_us")) for t in titles), titles
    modes = [k for k, ax in state["layout"].items() if k.startswith("yaxis") and ax.get("ticktext")]
    if any(t.endswith(": mode") for t in titles):
        assert modes and "PROBE_BW" in state["layout"][modes[0]]["ticktext"]
    # the two bbr_cws flows in two shades of bbr_cws's colour, the cubic flow in cubic's
    tput = next(f for f in figs if f["key"] == "throughput")
    colour = {t["name"]: t["line"]["color"] for t in tput["data"] if t["name"].startswith("flow")}
    assert colour["flow 0 · bbr_cws · 10 ms"] == shade(FIXED["bbr_cws"], 0, 2)
    assert colour["flow 1 · bbr_cws · 10 ms"] == shade(FIXED["bbr_cws"], 1, 2) != colour["flow 0 · bbr_cws · 10 ms"]
    assert colour["flow 2 · cubic · 10 ms"] == FIXED["cubic"]


def test_every_run_figure_starts_at_the_first_flows_start(tmp_path):
    run = make_run(tmp_path / "runs", RunSpec(scenario="late", duration_s=12,
                                               flows=[FlowSpec("bbr", 10, start_s=2),
                                                      FlowSpec("cubic", 10, start_s=3)]))
    _, figs = report(tmp_path, run, WALL)
    ranges = {(f["key"], tuple(f["layout"]["xaxis"]["range"])) for f in figs if "range" in f["layout"].get("xaxis", {})}
    assert ("retrans", (0.0, 20.0)) in ranges or any(k == "retrans" and r[0] == 0 for k, r in ranges)
    assert any(r[0] == 2 for _, r in ranges)  # the synthetic run's flows start at 2 s
    assert all(r[0] >= 0 for _, r in ranges)


@pytest.mark.parametrize("mean, ci, shown", [
    (1.002, 9.55e-16, "1.002 ± 0"), (19.162, 0.0, "19.162 ± 0"), (47.839, 1.234, "47.8 ± 1.2"),
    (0.000125, 0.0000312, "0.000125 ± 0.000031"), (12345.6, 210.0, "12,346 ± 210"), (0.8512, 0.0431, "0.851 ± 0.043"),
    (float("nan"), 1.0, "–"), (3.5, float("nan"), "3.5"),
])
def test_mean_and_ci_print_to_the_ci_s_precision(mean, ci, shown):
    assert fmt_ci(mean, ci) == shown


def test_a_cc_without_a_fixed_colour_gets_a_spare_no_other_cc_has():
    colors = CCColors(["cubic", "newcc", "othercc"])
    assert len({colors.of(c) for c in ("cubic", "newcc", "othercc", "bbr")}) == 4
