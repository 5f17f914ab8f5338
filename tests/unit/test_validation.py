"""cctest validate: the peer suite's gains beside the testbed's table (cctest/validation/), on
synthetic run directories whose goodputs are exact."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.cli.main import main
from cctest.model.plan import expand
from cctest.model.scenario import load_experiments
from cctest.validation import gains, heatmap, page, runs, testbed
from cctest.validation.gains import RunRow
from cctest.validation.testbed import Cell
from tests import REPO
from tests.report_fixtures import FlowSpec, RunSpec, make_run

SHALLOW, DEEP = 102_400, 10_240_000
TABLE = testbed.read_table()
# two cells of the stored table, with the testbed's gains
C1 = Cell(SHALLOW, 100.0, 5.0)  # testbed: -12
C2 = Cell(DEEP, 10.0, 10.0)  # testbed: -25


def peer_run(parent: Path, cell: Cell, cc: str, mbps: float, repetition: int = 0, *, engine: str = "uml",
             kernel: str = "6.1.0-uml", seed: int | None = None, verdict: str = "pass", status: str = "ok") -> Path:
    """A run of the peer suite: one flow of `cc` at exactly `mbps` on `cell`'s link."""
    d = make_run(parent, RunSpec(scenario="cao2019", flows=[FlowSpec(cc, cell.rtt_ms)], rate_mbps=cell.rate_mbps,
                                 duration_s=4, repetition=repetition, seed=seed if seed is not None else 1 + repetition,
                                 matrix={"buffer_bytes": cell.buffer_bytes, "rate_mbps": cell.rate_mbps,
                                         "rtt_ms": cell.rtt_ms, "flows.0.cc": cc, "engine": engine},
                                 constant_mbps=[mbps], noise=0, verdict=verdict))
    meta = json.loads((d / "meta.json").read_text())
    meta["link"].update(buffer_bytes=cell.buffer_bytes, rate_mbps=cell.rate_mbps, rtt_ms=cell.rtt_ms)
    meta["engine"] = {"name": engine}
    meta["kernel"]["release"] = kernel
    meta["status"] = status
    (d / "meta.json").write_text(json.dumps(meta))
    return d


def row(cell=C1, cc="bbr", mbps=90.0, repetition=0, engine="uml", seed=None, left_out="", run_id=None) -> RunRow:
    seed = 1 + repetition if seed is None else seed
    return RunRow(run_id or f"2026-{cc}-{engine}-{repetition}-{cell}", cell, cc, engine, "6.1", repetition, seed,
                  mbps, left_out)


# -- the stored table and the suite ------------------------------------------------------------------


def test_the_table_has_the_64_cells_up_to_100_mbps_with_buffers_in_tc_bytes():
    assert len(TABLE) == 64
    assert {c.buffer_bytes for c in TABLE} == {SHALLOW, DEEP}
    assert sorted({c.rate_mbps for c in TABLE}) == [10, 20, 50, 100]
    assert sorted({c.rtt_ms for c in TABLE}) == [5, 10, 25, 50, 75, 100, 150, 200]
    assert TABLE[C1] == -12 and TABLE[C2] == -25


def test_the_suite_file_validates_and_runs_every_cell_with_bbr_and_cubic_three_times():
    experiments = load_experiments(REPO / "peer" / "cao2019.yaml")
    specs = [s for name, sc in experiments.scenarios.items() if "peer-cao2019" in sc.tags
             for s in expand(experiments, name)]
    variants = {(s.link.buffer_bytes, s.link.rate_mbps, s.link.rtt_ms, s.flows[0].cc) for s in specs}
    assert len(variants) == 64 * 2 and len(specs) == 64 * 2 * 3
    assert {(b, r, t) for b, r, t, _ in variants} == {tuple(c) for c in TABLE}
    assert all(len(s.flows) == 1 and s.scenario.duration_s == 60 for s in specs)
    # BBR and CUBIC of one repetition share a seed: validate pairs them by it
    seeds = {}
    for s in specs:
        seeds.setdefault((s.link.buffer_bytes, s.link.rate_mbps, s.link.rtt_ms, s.repetition), set()).add(s.seed)
    assert all(len(v) == 1 for v in seeds.values())


def test_a_table_that_is_not_the_testbeds_is_bad_input(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(testbed.BadInput, match="columns must be bufcap"):
        testbed.read_table(bad)
    bad.write_text("bufcap,bandwidth,rtt,goodput_gain\n100,10,5,x\n")
    with pytest.raises(testbed.BadInput, match="line 2"):
        testbed.read_table(bad)


# -- gains and pairing ----------------------------------------------------------------------------------


def test_gain_is_bbrs_goodput_over_cubics_in_percent():
    assert gains.gain_pct(90, 100) == pytest.approx(-10)
    assert gains.gain_pct(110, 100) == pytest.approx(10)
    assert math.isnan(gains.gain_pct(1, 0))


def test_pairs_are_one_repetition_and_seed_of_both_ccs():
    rows = [row(cc="bbr", mbps=90, repetition=0), row(cc="cubic", mbps=100, repetition=0),
            row(cc="bbr", mbps=80, repetition=1), row(cc="cubic", mbps=100, repetition=1),
            row(cc="bbr", mbps=50, repetition=2),  # no CUBIC of repetition 2: unpaired
            row(cc="cubic", mbps=100, repetition=3, seed=99), row(cc="bbr", mbps=100, repetition=3)]  # seeds differ
    pairs = gains.pair(rows)
    assert [(b.repetition, b.goodput_mbps, c.goodput_mbps) for b, c in pairs] == [(0, 90, 100), (1, 80, 100)]
    [result] = [r for r in gains.compare(TABLE, rows) if r.cell == C1]
    assert result.gains == pytest.approx([-10, -20])
    assert result.n == 2 and result.unpaired == 3
    mean, ci = result.mean_ci
    assert mean == pytest.approx(-15)
    assert ci == pytest.approx(12.706 * math.sqrt(50) / math.sqrt(2))  # t(0.975, 1) * s / sqrt(n)
    assert result.diff == pytest.approx(-15 - TABLE[C1])


def test_left_out_runs_and_other_engines_never_pair():
    rows = [row(cc="bbr", mbps=90), row(cc="cubic", mbps=100, left_out="health failed"),
            row(cc="cubic", mbps=100, engine="qemu")]
    [qemu, uml] = [r for r in gains.compare(TABLE, rows) if r.cell == C1]  # engines by name
    assert (uml.engine, uml.n, uml.left_out, uml.unpaired) == ("uml", 0, 1, 1)
    assert (qemu.engine, qemu.n, qemu.unpaired) == ("qemu", 0, 1)


def test_a_repetition_run_twice_counts_once():
    rows = [row(cc="bbr", mbps=10, run_id="20260101-a"), row(cc="bbr", mbps=90, run_id="20260102-a"),
            row(cc="cubic", mbps=100)]
    [result] = [r for r in gains.compare(TABLE, rows) if r.cell == C1]
    assert result.gains == pytest.approx([-10])


def test_cells_without_runs_are_not_run_and_never_counted():
    rows = [row(cell=C1, cc="bbr", mbps=90), row(cell=C1, cc="cubic", mbps=100)]
    results = gains.compare(TABLE, rows)
    assert len(results) == 64
    empty = [r for r in results if r.cell != C1]
    assert all(r.n == 0 and r.engine == "" and math.isnan(r.diff) for r in empty)
    assert page.ours_text(empty[0]) == "not run"
    s = gains.summarise(results, "uml", len(TABLE))
    assert (s.measured, s.cells) == (1, 64)


def test_summary_shares_sign_agreement_and_worst_cells():
    c3, c4, c5 = Cell(SHALLOW, 10.0, 5.0), Cell(SHALLOW, 50.0, 5.0), Cell(DEEP, 10.0, 100.0)  # testbed 0, -5, 35
    assert (TABLE[c3], TABLE[c4], TABLE[c5]) == (0, -5, 35)
    mbps = {C1: 88, C2: 80, c3: 120, c4: 96, c5: 90}  # gains -12, -20, +20, -4, -10 over CUBIC's 100
    rows = [r for cell, bbr in mbps.items() for r in (row(cell=cell, cc="bbr", mbps=bbr),
                                                       row(cell=cell, cc="cubic", mbps=100))]
    s = gains.summarise(gains.compare(TABLE, rows), "uml", len(TABLE))
    # within 5 points: C1 (0), C2 (+5), c4 (+1); not c3 (+20) nor c5 (-45)
    assert (s.measured, s.within) == (5, 3) and s.within_share == pytest.approx(0.6)
    # |testbed| >= 5: C1 (-12, ours -12), C2 (-25, ours -20), c4 (-5, ours -4), c5 (+35, ours -10)
    assert (s.sign_cells, s.sign_agree) == (4, 3)
    assert [r.cell for r in s.worst[:2]] == [c5, c3]
    line = page.summary_line(s)
    assert "3 of 5 measured cells (60 %) within 5 points" in line and "59 of 64 not run" in line
    assert "sign agrees in 3 of 4 cells" in line


# -- run directories -------------------------------------------------------------------------------------


def test_runs_are_read_with_their_engine_kernel_and_goodput(tmp_path):
    peer_run(tmp_path, C1, "bbr", 45.0, kernel="6.1.0-uml")
    peer_run(tmp_path, C1, "cubic", 50.0, engine="qemu", kernel="6.1.0-25-amd64")
    make_run(tmp_path, RunSpec(scenario="other", duration_s=4))  # two flows: not a cell of the table
    found = runs.read([tmp_path], set(TABLE))
    assert found.other == 1
    by_cc = {r.cc: r for r in found.rows}
    assert (by_cc["bbr"].engine, by_cc["bbr"].kernel) == ("uml", "6.1.0-uml")
    assert (by_cc["cubic"].engine, by_cc["cubic"].kernel) == ("qemu", "6.1.0-25-amd64")
    # the receiver's total over the flow: the same small share short of what was sent, for both
    assert by_cc["bbr"].goodput_mbps / by_cc["cubic"].goodput_mbps == pytest.approx(0.9, rel=1e-3)


def test_failed_health_or_status_is_left_out(tmp_path):
    peer_run(tmp_path, C1, "bbr", 45.0, verdict="fail")
    peer_run(tmp_path, C1, "cubic", 50.0, status="failed")
    found = runs.read([tmp_path], set(TABLE))
    assert sorted(r.left_out for r in found.rows) == ["health failed", "status failed"]


# -- the command -----------------------------------------------------------------------------------------


@pytest.fixture()
def no_svg(monkeypatch):
    """The heatmap as HTML, as where kaleido cannot run: fast, and no browser started."""
    def fallback(fig, path):
        html = path.with_suffix(".html")
        html.write_text("<html>heatmap</html>")
        return html, "no exporter in the test"
    monkeypatch.setattr(heatmap, "write", fallback)


def grid(parent: Path) -> None:
    for rep, (bbr, cubic) in enumerate([(44.0, 50.0), (45.0, 50.0), (46.0, 50.0)]):
        peer_run(parent, C1, "bbr", bbr, rep)
        peer_run(parent, C1, "cubic", cubic, rep)


def test_validate_writes_the_page_and_the_readme_line(tmp_path, no_svg):
    grid(tmp_path / "runs")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- validation-score --> not run yet\nrest\n")
    out = tmp_path / "docs" / "validation.md"
    out.parent.mkdir()
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "runs"), "-o", str(out), "--readme", str(readme)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| 100 KB | 100 | 5 | -12.0 | -10.0 ± " in text  # gains -12, -10, -8 against the testbed's -12
    assert "| 3 | +2.0 | uml | 6.1.0-uml |" in text
    assert text.count("| not run |") == 63
    assert "uml: 1 of 1 measured cells (100 %) within 5 points of the testbed, 63 of 64 not run" in text
    assert "[validation-heatmap.html](validation-heatmap.html)" in text and "could not be rendered" in text
    lines = readme.read_text().splitlines()
    assert lines[0] == "# x" and lines[2] == "rest"
    assert lines[1].startswith("<!-- validation-score --> **Validation against a real testbed")
    assert "[docs/validation.md](docs/validation.md)" in lines[1]


def test_validate_writes_the_html_report_with_the_heatmap(tmp_path, no_svg):
    grid(tmp_path / "runs")
    html = tmp_path / "validation.html"
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "runs"), "-o", str(tmp_path / "v.md"),
                                       "--html", str(html)])
    assert result.exit_code == 0, result.output
    page_html = html.read_text()
    assert "validation-heatmap" in page_html and '"coloraxis"' in page_html and "heatmap" in page_html


def test_the_heatmap_has_two_panels_per_buffer_on_one_colour_scale():
    rows = [row(cell=C1, cc="bbr", mbps=90), row(cell=C1, cc="cubic", mbps=100)]
    results = gains.compare(TABLE, rows)
    fig = heatmap.figure(TABLE, results, gains.engines(results))
    assert len(fig.data) == 4  # 2 buffers x (testbed, uml)
    assert {t.coloraxis for t in fig.data} == {"coloraxis"}
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax == -35  # the table's largest |gain| here
    ours_shallow = fig.data[1]
    texts = [t for line in ours_shallow.text for t in line]
    assert texts.count("not run") == 31 and "-10" in texts


@pytest.mark.parametrize("args, message", [
    (["{runs}", "-o", "{tmp}/nodir/v.md"], "does not exist"),
    (["{runs}", "-o", "{tmp}"], "must end in .md"),
    (["{runs}", "-o", "{tmp}/v.txt"], "must end in .md"),
    (["{tmp}/missing", "-o", "{tmp}/v.md"], "no such file or directory"),
    (["{empty}", "-o", "{tmp}/v.md"], "no run directories"),
    (["{other}", "-o", "{tmp}/v.md"], "no run of the peer suite's cells"),
    (["{runs}", "-o", "{tmp}/v.md", "--figure", "{tmp}/h.png"], "must end in .svg"),
    (["{runs}", "-o", "{tmp}/v.md", "--readme", "{tmp}/R.md"], "no '<!-- validation-score -->' line"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, no_svg, args, message):
    grid(tmp_path / "runs")
    (tmp_path / "empty").mkdir()
    make_run(tmp_path / "other", RunSpec(scenario="other", duration_s=4))
    (tmp_path / "R.md").write_text("no mark\n")
    before = sorted(p for p in tmp_path.rglob("*"))
    argv = [a.format(tmp=tmp_path, runs=tmp_path / "runs", empty=tmp_path / "empty", other=tmp_path / "other")
            for a in args]
    result = CliRunner().invoke(main, ["validate", *argv])
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1
    assert sorted(p for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "R.md").read_text() == "no mark\n"


def test_the_committed_page_and_the_readme_line_agree():
    """README's validation line is the page's summary, or says "not run yet" while the page does."""
    text = (REPO / "docs" / "validation.md").read_text()
    readme = (REPO / "README.md").read_text()
    [line] = [x for x in readme.splitlines() if x.startswith(page.SCORE_MARK)]
    assert line.endswith("[docs/validation.md](docs/validation.md).")
    if "Not run yet" in text:
        assert "not run yet" in line
    else:
        summaries = [x[len("- **"):-len(".**")] for x in text.splitlines() if x.startswith("- **")]
        assert line == page.readme_line([], "docs/validation.md").strip().replace("not run yet", "; ".join(summaries))
