"""`cctest report` end to end on synthetic run dirs (tests/report_fixtures.py) and on any real run
dirs under tests/fixtures/runs/."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cctest.analysis import metrics as M
from cctest.analysis.stats import mean_ci95
from cctest.cli.report import report_command
from cctest.report.figure import decimate
from tests import REPO
from tests.browser import CHROMEDRIVER, CHROMIUM, MISSING, headless_chromium
from tests.report_fixtures import FlowSpec, RunSpec, make_run, make_sweep


def _real_runs() -> list[Path]:
    """Run dirs recorded by the engine: tests/fixtures/runs/ plus any dirs in $CCTEST_REPORT_RUNS
    (os.pathsep-separated), searched at any depth."""
    roots = [REPO / "tests" / "fixtures" / "runs"] + [Path(p) for p in os.environ.get("CCTEST_REPORT_RUNS", "").split(
        os.pathsep) if p]
    return sorted({m.parent for r in roots if r.is_dir() for m in r.rglob("meta.json")})


REAL_RUNS = _real_runs()


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    runs = {
        "mixed": make_run(root / "single", RunSpec(
            scenario="mixed", flows=[FlowSpec("bbr_cws", 10), FlowSpec("cubic", 10),
                                     FlowSpec("bbr3", 40, start_s=2), FlowSpec("bbr_modest", 20),
                                     FlowSpec("bbr_acw", 10, start_s=1, duration_s=15)],
            duration_s=20, tcp_probe_hz=50, matrix={"buffer_bdp": 1})),
        "bare": make_run(root / "bare", RunSpec(scenario="bare", qdisc=False, cc_state=False,
                                                flows=[FlowSpec("cubic", 20)], duration_s=8)),
    }
    make_sweep(root / "sweep", buffers=(0.5, 1, 4), rtts=(10, 40), pairs=(("bbr", "cubic"),
                                                                          ("bbr_cws", "cubic")), reps=2)
    seed = 500
    for rtt in (20, 50, 100):
        for r in range(2):
            seed += 1
            make_run(root / "rttsweep", RunSpec(scenario="acw-rtt", flows=[FlowSpec("bbr_acw", 10),
                                                                            FlowSpec("bbr_acw", rtt)],
                                                matrix={"rtt2": rtt}, repetition=r, seed=seed, duration_s=12))
    for loss in (0, 1, 3):
        make_run(root / "losssweep", RunSpec(scenario="loss", flows=[FlowSpec("bbr", 10)], loss_pct=loss,
                                             matrix={"loss_pct": loss}, duration_s=8, seed=loss + 900))
    return root, runs


def invoke(*args):
    res = CliRunner().invoke(report_command, [str(a) for a in args], catch_exceptions=False)
    return res


def read_summary(out: Path):
    return (pd.read_csv(out.with_name(out.stem + ".summary.csv")),
            json.loads(out.with_name(out.stem + ".summary.json").read_text()))


def fig_keys(html: str) -> list[str]:
    import re
    return re.findall(r"data-key='([^']*)'", html)


def _params():
    return [pytest.param(("synthetic", "mixed"), id="synthetic-mixed"),
            pytest.param(("synthetic", "bare"), id="synthetic-bare")] + \
        [pytest.param(("real", p), id=f"real-{p.name}") for p in REAL_RUNS]


@pytest.mark.parametrize("which", _params())
def test_report_of_one_run(which, synth, tmp_path):
    kind, name = which
    run_dir = synth[1][name] if kind == "synthetic" else name
    out = tmp_path / "r" / "report.html"
    res = invoke(run_dir, "-o", out)
    assert res.exit_code == 0, res.output
    html = out.read_text()
    from plotly.offline import get_plotlyjs
    assert html.count(get_plotlyjs()[:300]) == 1  # plotly.js embedded exactly once
    assert "<script src=" not in html and "<link " not in html  # nothing fetched
    csv, js = read_summary(out)
    flows_pq = pd.read_parquet(run_dir / "flows.parquet")
    got = csv[csv["level"] == "flow"].set_index("flow")["bytes"]
    for r in flows_pq.itertuples():
        if not pd.isna(r.bytes_received):  # NA: iperf3 was interrupted before its summary
            assert got.loc[r.flow] == pytest.approx(r.bytes_received, rel=0.01)
    assert len(js["runs"]) == 1 and len(js["flows"]) == len(flows_pq)
    keys = fig_keys(html)
    assert "throughput" in keys
    if (run_dir / "qdisc.parquet").exists():
        assert "queue" in keys or "no bottleneck samples while the flows ran" in html
    else:
        assert "qdisc.parquet absent" in html
    if (run_dir / "cc_state.parquet").exists():
        assert "cc_state" in keys
    else:
        assert "cc_state.parquet absent" in html
    if not (run_dir / "tcp_probe.parquet").exists():
        assert "tcp_probe.parquet absent" in html
    assert "Emulation health" in html


def test_flow_totals_match_receiver_bytes_for_real_runs():
    if not REAL_RUNS:
        pytest.skip("no real run dirs under tests/fixtures/runs/ yet")
    from cctest.analysis.load import load_run
    checked = 0
    for d in REAL_RUNS:
        run = load_run(d)
        res = M.run_metrics(run.record, run.tables)
        fl = pd.read_parquet(d / "flows.parquet").set_index("flow")
        for f in res.flows:
            received = fl.loc[f["flow"], "bytes_received"]
            if pd.isna(received):
                continue
            assert f["bytes"] == pytest.approx(received, rel=0.01)
            checked += 1
            if run.record.status == "ok":
                # the sender-side intervals (the time series) add up to iperf3's sender total
                assert f["bytes_intervals"] == pytest.approx(fl.loc[f["flow"], "bytes_sent"], rel=0.01)
    assert checked, "no flow with a receiver total in the real runs"


def test_sweep_figures_and_repetition_ci(synth, tmp_path):
    root, _ = synth
    out = tmp_path / "sweep.html"
    res = invoke(root / "sweep", "-o", out)
    assert res.exit_code == 0, res.output
    html = out.read_text()
    keys = fig_keys(html)
    for k in ("sweep_jain_buffer", "sweep_share_buffer", "sweep_retrans_buffer"):
        assert k in keys
    for k in ("sweep_share_rtt", "sweep_jain_rtt", "sweep_util_loss"):
        assert k not in keys  # these runs do not vary the flows' RTT or loss
    assert "Throughput per flow and congestion control (1 s intervals)" in html and "Repetitions" in html
    assert "003 Table 1" not in html and "Fig. 13" not in html  # seed figures are cited for paper suites only
    csv, js = read_summary(out)
    assert len(js["runs"]) == 24
    groups = js["repetition_groups"]
    assert len(groups) == 12 and all(g["runs"] == 2 for g in groups)
    runs = csv[csv["level"] == "run"]
    g0 = groups[0]
    vals = runs[runs["group_label"] == g0["label"]]["jain"].to_numpy()
    mean, hw, n = mean_ci95(vals)
    assert g0["metrics"]["jain"]["mean"] == pytest.approx(mean)
    assert g0["metrics"]["jain"]["ci95"] == pytest.approx(hw)
    assert set(csv["level"]) == {"run", "flow", "cc_group"}


def test_rtt_and_loss_sweeps(synth, tmp_path):
    root, _ = synth
    out = tmp_path / "rtt.html"
    assert invoke(root / "rttsweep", "-o", out).exit_code == 0
    keys = fig_keys(out.read_text())
    assert "sweep_share_rtt" in keys and "sweep_jain_rtt" in keys and "sweep_jain_buffer" not in keys
    out = tmp_path / "loss.html"
    assert invoke(root / "losssweep", "-o", out).exit_code == 0
    keys = fig_keys(out.read_text())
    assert keys.count("sweep_util_loss") == 1 and "sweep_jain_buffer" not in keys


def test_several_paths_and_options(synth, tmp_path):
    root, runs = synth
    out = tmp_path / "o" / "x.html"
    res = invoke(runs["mixed"], root / "losssweep", "-o", out, "--bin-ms", 200, "--skip-s", 3,
                 "--jain-window-s", 2)
    assert res.exit_code == 0, res.output
    _, js = read_summary(out)
    assert len(js["runs"]) == 4
    assert js["options"]["bin_ms"] == 200 and js["options"]["skip_s"] == 3
    assert js["runs"][0]["steady_t0_s"] == 3
    # the same dir twice is one run
    res = invoke(runs["mixed"], runs["mixed"].parent, "-o", out)
    assert res.exit_code == 0 and "1 run(s)" in res.output


def test_bad_input_exits_2_naming_the_path(tmp_path):
    missing = tmp_path / "nope"
    res = CliRunner().invoke(report_command, [str(missing), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert str(missing) in res.output and len(res.output.strip().splitlines()) == 1
    empty = tmp_path / "empty"
    (empty / "a" / "b").mkdir(parents=True)
    res = CliRunner().invoke(report_command, [str(empty), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and str(empty) in res.output
    assert len(res.output.strip().splitlines()) == 1
    bad = tmp_path / "bad" / "run1"
    bad.mkdir(parents=True)
    (bad / "meta.json").write_text("{not json")
    res = CliRunner().invoke(report_command, [str(tmp_path / "bad"), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and str(bad / "meta.json") in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = CliRunner().invoke(report_command, [])
    assert res.exit_code == 2


def test_compare_flags_regressions(tmp_path):
    base = make_run(tmp_path / "base", RunSpec(scenario="s", buffer_bdp=2, seed=3))
    same = make_run(tmp_path / "same", RunSpec(scenario="s", buffer_bdp=2, seed=3))
    res = invoke("--compare", base, same, "-o", tmp_path / "c1.html")
    assert res.exit_code == 0, res.output
    assert "REGRESSION" not in res.output
    # The candidate retransmits far more (shallower buffer in the synthetic model).
    worse = make_run(tmp_path / "worse", RunSpec(scenario="s", buffer_bdp=0.2, seed=3))
    res = invoke("--compare", base, worse, "-o", tmp_path / "c2.html", "--threshold", 10)
    assert res.exit_code == 1
    assert "REGRESSION" in res.output and "retransmissions" in res.output
    js = json.loads((tmp_path / "c2.summary.json").read_text())
    assert js["compare"]["regressions"] >= 1
    assert "Comparison" in (tmp_path / "c2.html").read_text()
    # A huge threshold tolerates it.
    res = invoke("--compare", base, worse, "-o", tmp_path / "c3.html", "--threshold", 1e9)
    assert res.exit_code == 0
    res = CliRunner().invoke(report_command, ["--compare", str(base), str(worse), str(base)])
    assert res.exit_code == 2
    # Nothing in common (two configurations on each side, none shared): an error, not a pass.
    for name, bdps in (("b2", (1, 2)), ("c2", (3, 4))):
        for bdp in bdps:
            make_run(tmp_path / name, RunSpec(scenario="s", buffer_bdp=bdp, matrix={"buffer_bdp": bdp}))
    res = invoke("--compare", tmp_path / "b2", tmp_path / "c2", "-o", tmp_path / "c4.html")
    assert res.exit_code == 2 and "nothing compared" in res.output


def test_decimation_keeps_extremes():
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 500)
    y[12345] = 50
    y[77777] = -50
    xd, yd = decimate(x, y, 1000)
    assert len(xd) <= 1000 and yd.max() == 50 and yd.min() == -50
    assert np.all(np.diff(xd) > 0)
    xs, ys = decimate(x[:10], y[:10], 1000)
    assert len(xs) == 10


def test_large_run_is_decimated_for_display(tmp_path):
    d = make_run(tmp_path, RunSpec(flows=[FlowSpec("bbr", 10), FlowSpec("cubic", 10)], duration_s=60,
                                   ss_interval_ms=5, qdisc_interval_ms=5, tcp_probe_hz=300))
    out = tmp_path / "big.html"
    res = invoke(d, "-o", out, "--max-points", 1000)
    assert res.exit_code == 0
    html = out.read_text()
    assert "scattergl" in html  # many points in one figure -> WebGL
    # metrics use all samples: mean queue delay equals the full-resolution mean
    from cctest.analysis.load import load_run
    run = load_run(d)
    _, js = read_summary(out)
    bq = run.tables["qdisc"][run.tables["qdisc"]["role"] == "bottleneck"]
    full = (bq["backlog_bytes"] * 8 / (run.record.link.rate_mbps * 1e6) * 1e3).mean()
    assert js["runs"][0]["mean_queue_delay_ms"] == pytest.approx(full)


# ---------------------------------------------------------------------------------------------
# In a real browser
# ---------------------------------------------------------------------------------------------

FIG_STATE_JS = """
function npts(t){
  var n = 0;
  ['y', 'x', 'values'].forEach(function(k){
    var a = t[k];
    if (!n && a) n = (a.length !== undefined) ? a.length : (a.bdata ? a.bdata.length : 0);
  });
  return n;
}
return Array.from(document.querySelectorAll('div.fig')).map(function(d){
  var gd = d.classList.contains('js-plotly-plot') ? d : null;
  var pts = 0, traces = 0, full = 0;
  if (gd && gd.data) {
    traces = gd.data.length;
    gd.data.forEach(function(t){ pts += npts(t); });
    (gd._fullData || []).forEach(function(t){ full += npts(t); });
  }
  return {key: d.dataset.key, plot: !!gd, traces: traces, points: pts, full_points: full};
});
"""


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)
def test_report_renders_in_headless_chromium(synth, tmp_path):
    pytest.importorskip("selenium", reason="selenium not installed (pip install selenium)")
    root, runs = synth
    out = tmp_path / "browser.html"
    broken = make_broken(tmp_path / "broken")
    res = invoke(runs["mixed"], root / "sweep" / "bbr-vs-cubic", root / "rttsweep", runs["bare"], broken,
                 *REAL_RUNS, "-o", out)
    assert res.exit_code == 0, res.output
    drv = headless_chromium(tmp_path / "chromium-profile", 1400, 1000, browser_log=True)  # a fresh profile every run
    try:
        drv.get(out.resolve().as_uri())
        n = drv.execute_script("return window.cctestRenderAll();")
        assert n > 20
        deadline = time.time() + 60
        while True:
            state = drv.execute_script(FIG_STATE_JS)
            if all(s["plot"] for s in state) or time.time() > deadline:
                break
            time.sleep(0.5)
        assert len(state) == n
        empty = [s for s in state if not (s["plot"] and s["traces"] > 0 and s["points"] > 0
                                          and s["full_points"] > 0)]
        assert not empty, f"figures without data: {empty}"
        logs = drv.get_log("browser")
        errors = [entry for entry in logs if entry["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        drv.quit()


def make_broken(parent: Path) -> Path:
    """A failed run (no tables but flows, no checks), an all-empty run and one with a corrupt table."""
    a = make_run(parent, RunSpec(scenario="failed"))
    for f in ("throughput", "ss", "qdisc", "ping"):
        (a / f"{f}.parquet").unlink()
    (a / "checks.json").unlink()
    meta = json.loads((a / "meta.json").read_text())
    meta.update(status="failed", error="iperf3 died")
    (a / "meta.json").write_text(json.dumps(meta))
    b = make_run(parent, RunSpec(scenario="empty", flows=[FlowSpec("bbr_cws", 10)]))
    for f in ("throughput", "ss", "qdisc", "cc_state", "flows", "ping"):
        pd.read_parquet(b / f"{f}.parquet").iloc[:0].to_parquet(b / f"{f}.parquet")
    c = make_run(parent, RunSpec(scenario="corrupt"))
    (c / "ss.parquet").write_text("garbage")
    return parent


def test_failed_empty_and_corrupt_runs_do_not_sink_the_report(tmp_path):
    make_broken(tmp_path / "x")
    out = tmp_path / "r.html"
    res = invoke(tmp_path / "x", "-o", out)
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert "run status failed: iperf3 died" in html
    assert "throughput.parquet absent" in html and "checks.json absent" in html
    assert "ss.parquet: unreadable" in html
    _, js = read_summary(out)
    assert len(js["runs"]) == 3
