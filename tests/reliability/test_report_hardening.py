"""A report never crashes on one malformed run and never passes on missing data: a bad run becomes
a visible note (page and stderr) and the others render; a run directory without meta.json is
named; --compare fails when the candidate lacks a metric the baseline has; what the page embeds
cannot close its script element; summary.csv cells cannot run as spreadsheet formulas."""

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from cctest.analysis.load import load_runs
from cctest.cli.main import main
from cctest.cli.report import report_command
from cctest.report.build import Options, analyse, write_report
from tests import REPO
from tests.reliability.run_corruptions import CORRUPTIONS
from tests.report_fixtures import RunSpec, make_run

REAL = REPO / "tests" / "fixtures" / "runs" / "cubic-bbr-shallow-20261121-231855-base-r0"


def report(*args):
    return CliRunner().invoke(report_command, [str(a) for a in args])


@pytest.fixture(scope="module")
def good_and_bad(tmp_path_factory):
    """One sweep directory per corruption: a good copy of a real run beside a corrupted one."""
    root = tmp_path_factory.mktemp("corrupt")
    for name, corrupt in CORRUPTIONS.items():
        case = root / re.sub(r"\W", "_", name)
        shutil.copytree(REAL, case / "good")
        shutil.copytree(REAL, case / "bad")
        corrupt(case / "bad")
    return root


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_one_malformed_run_is_a_note_and_the_rest_renders(good_and_bad, tmp_path, name):
    case = good_and_bad / re.sub(r"\W", "_", name)
    out = tmp_path / "r.html"
    res = report(case, "-o", out)
    assert res.exit_code == 0, (res.output, res.exception)
    summary = json.loads((tmp_path / "r.summary.json").read_text())
    assert str(case / "good") in {r["path"] for r in summary["runs"]}  # the good run is there
    html = out.read_text()
    bad = str(case / "bad")
    if not any(r["path"] == bad for r in summary["runs"]):  # left out: named, on the page and on stderr
        assert bad in res.stderr and bad in html and "Runs not shown" in html
    else:  # kept: what was wrong with it is a note
        assert any(line.startswith("warning: ") and bad in line for line in res.stderr.splitlines()) or \
            name in ("interval zero", "flows in ping", "empty throughput"), res.stderr


def test_a_run_directory_without_meta_json_is_named(tmp_path):
    shutil.copytree(REAL, tmp_path / "sweep" / "a")
    shutil.copytree(REAL, tmp_path / "sweep" / "b")
    (tmp_path / "sweep" / "b" / "meta.json").unlink()
    res = report(tmp_path / "sweep", "-o", tmp_path / "r.html")
    assert res.exit_code == 0
    assert f"{tmp_path / 'sweep' / 'b'}: a run directory without meta.json" in res.stderr
    (tmp_path / "sweep" / "a" / "meta.json").unlink()
    res = report(tmp_path / "sweep", "-o", tmp_path / "r.html")
    assert res.exit_code == 2 and "without meta.json" in res.output and len(res.output.strip().splitlines()) == 1


def test_no_readable_run_is_one_line_exit_2(tmp_path):
    shutil.copytree(REAL, tmp_path / "x" / "a")
    (tmp_path / "x" / "a" / "meta.json").write_text('{"matrix": [1]}')
    res = report(tmp_path / "x", "-o", tmp_path / "r.html")
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and "matrix" in res.output


def test_compare_fails_when_the_candidate_lacks_a_metric(tmp_path):
    shutil.copytree(REAL, tmp_path / "base" / "r")
    shutil.copytree(REAL, tmp_path / "cand" / "r")
    res = report("--compare", tmp_path / "base", tmp_path / "cand", "-o", tmp_path / "same.html")
    assert res.exit_code == 0, res.output
    qdisc = tmp_path / "cand" / "r" / "qdisc.parquet"
    qdisc.write_bytes(qdisc.read_bytes()[:100])  # truncated: the bottleneck's metrics are gone
    res = report("--compare", tmp_path / "base", tmp_path / "cand", "-o", tmp_path / "c.html")
    assert res.exit_code == 1, res.output
    missing = [line for line in res.output.splitlines() if "missing in the candidate" in line]
    assert any("bottleneck drops" in line for line in missing)
    assert all(line.startswith("REGRESSION") for line in missing)
    assert "qdisc.parquet: unreadable" in res.stderr  # and why, on stderr
    rows = json.loads((tmp_path / "c.summary.json").read_text())["compare"]["rows"]
    assert any(r["candidate"] is None and r["regression"] for r in rows)


def test_embedded_json_cannot_close_its_script_and_csv_cannot_run_formulas(tmp_path):
    run = make_run(tmp_path / "runs", RunSpec(scenario="s", duration_s=5))
    meta = json.loads((run / "meta.json").read_text())
    meta.update(scenario="=HYPERLINK(\"http://x\")<!--</script><script>alert(1)</script>",
                matrix={"note": "@SUM(1)", "other": "-1+2"})
    (run / "meta.json").write_text(json.dumps(meta))
    out = tmp_path / "r.html"
    assert report(tmp_path / "runs", "-o", out).exit_code == 0
    html = out.read_text()
    for block in re.findall(r"<script type='application/json'[^>]*>(.*?)</script>", html, flags=re.S):
        assert "<" not in block
    assert "alert(1)</script>" not in html
    with open(tmp_path / "r.summary.csv", newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    assert cells and not any(c and c[0] in "=+@" for c in cells)
    assert not any(c.startswith("-") and not re.fullmatch(r"-[\d.e+-]+", c) for c in cells)
    assert "'=HYPERLINK(\"http://x\")<!--</script><script>alert(1)</script>" in cells and "'@SUM(1)" in cells


def test_a_run_directory_name_that_is_not_utf8(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    shutil.copytree(REAL, os.fsdecode(os.fsencode(root) + b"/bad\xffname"))
    res = report(root, "-o", tmp_path / "r.html")
    assert res.exit_code == 0, (res.output, res.exception)
    assert "bad\ufffdname" in (tmp_path / "r.html").read_text(encoding="utf-8")


# The property: whatever meta.json and checks.json hold, loading and analysing keeps the good run
# and either keeps or names the other; nothing raises.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
META_KEYS = ["scenario", "status", "error", "run_id", "repetition", "duration_s", "matrix", "link", "flows",
             "kernel", "t0_monotonic_ns", "mode", "start_time", "link.rate_mbps", "link.bdp_bytes",
             "link.buffer_bdp", "flows.0", "flows.0.flow", "flows.0.cc", "flows.1.rtt_ms", "flows.0.start_s"]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("small"), RunSpec(scenario="s", duration_s=4))


def _set(doc: dict, dotted: str, value) -> None:
    """Set a dotted key where the path still exists (an earlier edit may have made a level a list or a
    scalar: then there is nothing to set)."""
    node, parts = doc, dotted.split(".")
    for depth, part in enumerate(parts):
        if isinstance(node, list) and not (part.isdigit() and int(part) < len(node)):
            return
        if not isinstance(node, (dict, list)):
            return
        if depth == len(parts) - 1:
            node[int(part) if isinstance(node, list) else part] = value
            return
        node = node[int(part)] if isinstance(node, list) else node.get(part)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(META_KEYS), json_values), min_size=1, max_size=3),
       checks=st.one_of(st.none(), json_values))
def test_property_any_meta_or_checks_keeps_the_report(small_run, tmp_path_factory, edits, checks):
    root = tmp_path_factory.mktemp("prop")
    shutil.copytree(small_run, root / "good")
    shutil.copytree(small_run, root / "bad")
    meta = json.loads((root / "bad" / "meta.json").read_text())
    for key, value in edits:
        _set(meta, key, value)
    (root / "bad" / "meta.json").write_text(json.dumps(meta))
    if checks is not None:
        (root / "bad" / "checks.json").write_text(json.dumps(checks))
    skipped: list[str] = []
    runs = load_runs([root], skipped)
    runs, results, summary = analyse(runs, Options(), skipped)
    paths = {str(run.path) for run in runs}
    assert str(root / "good") in paths
    assert str(root / "bad") in paths or any(str(root / "bad") in s for s in skipped)
    if len(edits) == 1:  # and the page and summary files are written (the slow part: a few examples)
        write_report([root], root / "r.html", Options())


def test_link_values_given_as_numeric_text_are_read_as_numbers(tmp_path):
    as_numbers, as_text, not_numbers = (tmp_path / n for n in ("numbers", "text", "fast"))
    for d in (as_numbers, as_text, not_numbers):
        shutil.copytree(REAL, d)
    edit = {"rate_mbps": "10", "rtt_ms": "20.0", "buffer_bdp": "0.5", "bdp_bytes": "25000"}
    for d, link in ((as_text, edit), (not_numbers, {"rate_mbps": "fast"})):
        meta = json.loads((d / "meta.json").read_text())
        meta["link"].update(link)
        (d / "meta.json").write_text(json.dumps(meta))
    res = report(tmp_path, "-o", tmp_path / "r.html")
    assert res.exit_code == 0, (res.output, res.exception)
    runs = {r["path"]: r for r in json.loads((tmp_path / "r.summary.json").read_text())["runs"]}
    # the text run is kept, with the same link and so the same link-derived metrics as the numeric one
    numbers, text = runs[str(as_numbers)], runs[str(as_text)]
    assert (text["rate_mbps"], text["rtt_ms"], text["buffer_bdp"]) == (10, 20.0, 0.5)
    assert text["utilisation"] == numbers["utilisation"] and text["utilisation"] > 0
    assert "meta.json link.rate_mbps is text ('10'); read as the number 10" in res.stderr
    # text that is no number: that run is named as bad and left out
    assert str(not_numbers) not in runs
    assert any(str(not_numbers) in line and "link.rate_mbps must be a finite number, not 'fast'" in line
               for line in res.stderr.splitlines())


# --- a claim carried by run directories that cannot be judged fails the gate ------------------------

VARIANTS = (REPO / "tests" / "fixtures" / "runs"
            / "variants-vs-cubic-20261121-232839-bufferbdp-0.5_f1.cc-bbrcws-r0")
FAILING = "share(bbr_cws) > 0.999"  # contradicted by the recorded run: exit 3 when judged


def _run_claiming(tmp_path: Path, expect) -> Path:
    import yaml

    run = tmp_path / "runs" / "r"
    shutil.copytree(VARIANTS, run)
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    resolved["expect"] = expect
    (run / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    return run


def test_a_failing_claim_carried_by_a_run_fails_the_gate(tmp_path):
    run = _run_claiming(tmp_path, [{"claim": FAILING}])
    result = CliRunner().invoke(main, ["check", str(run), "--recorded-claims", "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 3, result.output


UNJUDGEABLE = {
    "invalid known triage": ([{"claim": FAILING, "known": {"triage": "bogus", "reason": "x"}}],
                             "expect.0.known.triage"),
    "beside an unparsable claim": ([{"claim": FAILING}, {"claim": "share(("}], "expect.1.claim"),
    "a bare string": ([FAILING], "expect.0: str"),
    "an unknown key": ([{"claim": FAILING, "wehre": {"buffer_bdp": 0.5}}], "unknown key; did you mean where?"),
    "a where key the runs lack": ([{"claim": FAILING, "where": {"rtt_ms": 20}}],
                                  "'rtt_ms' is not a matrix key of its runs; allowed: buffer_bdp, flows.1.cc"),
    "a boolean where a number is meant": ([{"claim": FAILING, "where": {"buffer_bdp": True}}],
                                          "where.buffer_bdp: True; its runs' values are 0.5"),
    "expect not a list": ({"claim": FAILING}, "expect: dict; a list of claims"),
}


@pytest.mark.parametrize("command", ["check", "report"])
@pytest.mark.parametrize("case", UNJUDGEABLE)
def test_a_claim_that_cannot_be_judged_fails_the_gate(tmp_path, command, case):
    """Each of these stopped failing (a warning, exit 0): now one line, exit 2, nothing written."""
    expect, message = UNJUDGEABLE[case]
    run = _run_claiming(tmp_path, expect)
    out = tmp_path / "out" / "x"
    result = CliRunner().invoke(main, [command, str(run), "--recorded-claims", "-o", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0] and "cannot be judged fails the gate" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_check_markdown_refuses_a_paper_run_of_a_scenario_the_file_lacks(tmp_path):
    import yaml

    run = _run_claiming(tmp_path, [{"claim": FAILING}])
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    (run / "scenario.yaml").write_text(yaml.safe_dump({**resolved, "tags": ["paper-001"]}))
    (tmp_path / "exp.yaml").write_text("scenarios: {other: {link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}, "
                                       "duration_s: 5, flows: [{cc: cubic}], tags: [paper-001], "
                                       "expect: [{claim: 'jain > 0'}]}}\n")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "runs"), "-f", str(tmp_path / "exp.yaml"), "-o",
                                       str(tmp_path / "c.json"), "--markdown", str(tmp_path / "page.md")])
    assert result.exit_code == 2 and "which" in result.stderr and "lacks" in result.stderr, result.output
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "page.md").exists()
