"""Claims as code: the expression language, its judging with confidence intervals, and the commands
that apply it to run directories (recorded VM runs in tests/fixtures/runs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from cctest.analysis.claims import Expectation, check_expectation, judge
from cctest.cli.main import main
from cctest.model.claim_language import ClaimError, parse
from cctest.model.scenario import ScenarioError, load_experiments, parse_experiments
from tests import REPO

FIXTURES = REPO / "tests" / "fixtures" / "runs"


# --- the language --------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "jain < 0.8", "share(bbr) > 0.7", "retransmits(bbr_cws) <= 0.5 * retransmits(bbr)",
    "0.4 < share(cubic) < 0.6", "throughput(bbr) / throughput(cubic) >= -(-2)", "queue_delay_ms < 5",
    "share('bbr') > 0.5", "startup_s(bbr3plus) < startup_s(bbr3)",
])
def test_the_language_accepts_claims_about_metrics(text):
    assert parse(text).text == text


@pytest.mark.parametrize("text, says", [
    ("__import__('os').system('reboot') < 1", "unknown function"),
    ("().__class__.__bases__ < 1", "not allowed"),
    ("jain.real < 1", "not allowed"),
    ("[jain][0] < 1", "not allowed"),
    ("(lambda: 1)() < 1", "unknown function"),
    ("jain ** 99999999 < 1", "not allowed"),
    ("jain if jain else 1 < 2", "must compare"),
    ("jain == 0.8", "never exactly equal"),
    ("jain", "must compare"),
    ("1 < 2", "only numbers"),
    ("jain < 1e999", "finite"),
    ("jain < True", "finite numbers"),
    ("jian < 1", "unknown metric 'jian'"),
    ("share < 1", "share(cc)"),
    ("share(bbr, cubic) > 0", "one congestion control"),
    ("share(cc=bbr) > 0", "one congestion control"),
    ("share(1) > 0", "congestion control's name"),
    ("jain < (" * 500 + "1" + ")" * 500, "longer than"),
    ("jain <", "not an expression"),
    ("", "non-empty"),
])
def test_hostile_or_wrong_claims_are_rejected_with_what_is_allowed(text, says):
    with pytest.raises(ClaimError, match=None) as error:
        parse(text)
    assert says in str(error.value)
    assert "\n" not in str(error.value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_text_parses_or_is_a_claim_error(text):
    try:
        parse(text)
    except ClaimError:
        pass


def experiments_with(claim: str, where: str = "") -> str:
    return f"""
scenarios:
  sweep:
    link: {{rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}}
    flows: [{{cc: cubic}}, {{cc: bbr}}]
    duration_s: 10
    matrix: {{buffer_bdp: [0.5, 5], flows.1.cc: [bbr, bbr_cws]}}
    expect:
      - {{claim: "{claim}"{where}}}
"""


@pytest.mark.parametrize("claim, where, says", [
    ("jian < 1", "", "key expect.0.claim: 'jian < 1': unknown metric"),
    ("share(reno) > 0", "", "names reno, which no flow runs; this scenario runs: bbr, bbr_cws, cubic"),
    ("jain < 1", ", where: {rtt_ms: 5}", "where 'rtt_ms' is not a matrix key; allowed: buffer_bdp, flows.1.cc"),
    ("jain < 1", ", where: {buffer_bdp: 3}", "where buffer_bdp: 3 is not among the matrix's values [0.5, 5]"),
])
def test_a_bad_claim_is_one_line_naming_file_scenario_and_claim(claim, where, says):
    with pytest.raises(ScenarioError) as error:
        parse_experiments(experiments_with(claim, where), "x.yaml")
    assert str(error.value).startswith("x.yaml: scenario sweep: key expect")
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_bad_claim_exits_2_from_the_command_line(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(experiments_with("jain = 1"))
    result = CliRunner().invoke(main, ["list", "-f", str(f)])
    assert result.exit_code == 2
    assert "scenario sweep: key expect.0.claim" in result.output


# --- judging: confidence intervals, per point and across points ------------------------------


@pytest.mark.parametrize("margins, strict, verdict", [
    ([[0.10], [0.12], [0.11]], [True], "pass"),  # interval above zero
    ([[-0.10], [-0.12], [-0.11]], [True], "fail"),  # below
    ([[-0.10], [0.20], [0.05]], [True], "inconclusive"),  # straddles the bound
    ([[0.3]], [True], "pass"),  # one repetition: its value decides
    ([[0.0]], [True], "fail"),  # strict and exactly on the bound
    ([[0.0]], [False], "pass"),  # non-strict and on the bound
    ([[0.2, -0.10], [0.3, -0.11], [0.25, -0.12]], [True, True], "fail"),  # a chain fails if one comparison fails
    ([], [True], "no data"),
])
def test_verdicts_follow_the_confidence_interval(margins, strict, verdict):
    assert judge(margins, strict)[0] == verdict


def points(runs: pd.DataFrame, groups: pd.DataFrame) -> list:
    """The rows of a per-run and a per-run x cc table as the runs a claim judges: matrix.* columns
    give the matrix point, the other columns the terms."""
    from cctest.analysis.run_point import RunPoint
    from cctest.model.metric_table import CcValues, RunValues

    cc_rows = groups.to_dict("records") if len(groups) else []
    return [RunPoint(row["run_id"], row["scenario"], (), row["group"], row["group_label"],
                     {k.removeprefix("matrix."): v for k, v in row.items() if k.startswith("matrix.")},
                     row["repetition"], values=RunValues(**RunValues.known(row)),
                     ccs={g["cc"]: CcValues(**CcValues.known(g)) for g in cc_rows if g["run_id"] == row["run_id"]})
            for row in runs.to_dict("records")]


def sweep_tables(jain: dict, retrans: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-run and per-run x cc tables as the report makes them, for a buffer x variant sweep."""
    runs, groups = [], []
    for (buffer, cc), values in jain.items():
        for rep, j in enumerate(values):
            run_id = f"{buffer}-{cc}-{rep}"
            label = f"sweep [buffer_bdp={buffer}, flows.1.cc={cc}]"
            runs.append({"run_id": run_id, "scenario": "sweep", "repetition": rep, "group": label,
                         "group_label": label, "matrix.buffer_bdp": buffer, "matrix.flows.1.cc": cc, "jain": j})
            for c, share in (("cubic", 0.3), (cc, 0.7)):
                groups.append({"run_id": run_id, "cc": c, "flows": 1, "share": share, "steady_share": share,
                               "mean_mbps": 20 * share, "retransmits": retrans[(buffer, cc)][rep] if c == cc else 5})
    return pd.DataFrame(runs), pd.DataFrame(groups)


JAIN = {(0.5, "bbr"): [0.62, 0.65, 0.63], (0.5, "bbr_cws"): [0.93, 0.95, 0.94],
        (5, "bbr"): [0.75, 0.90, 0.81], (5, "bbr_cws"): [0.97, 0.99, 0.98]}
RETRANS = {(0.5, "bbr"): [400, 420, 410], (0.5, "bbr_cws"): [100, 90, 110],
           (5, "bbr"): [10, 12, 8], (5, "bbr_cws"): [4, 6, 5]}


def expectation(claim: str, **where) -> Expectation:
    return Expectation.from_entry("sweep", {"claim": claim, "where": where})


def test_a_claim_is_judged_per_selected_point_with_repetitions():
    runs, groups = sweep_tables(JAIN, RETRANS)
    verdicts = check_expectation(expectation("jain < 0.8", buffer_bdp=0.5), points(runs, groups))
    by_point = {v.point: v.verdict for v in verdicts}
    assert by_point == {"sweep [buffer_bdp=0.5, flows.1.cc=bbr]": "pass",
                        "sweep [buffer_bdp=0.5, flows.1.cc=bbr_cws]": "fail"}
    mean, ci, n = verdicts[0].values["jain"]
    assert mean == pytest.approx(0.6333, abs=1e-3) and n == 3 and 0 < ci < 0.05
    deep = check_expectation(expectation("jain < 0.8", buffer_bdp=5, **{"flows.1.cc": "bbr"}), points(runs, groups))
    assert [v.verdict for v in deep] == ["inconclusive"]  # 0.75, 0.90, 0.81: the CI straddles 0.8


def test_a_claim_naming_controls_of_different_points_is_judged_across_them():
    runs, groups = sweep_tables(JAIN, RETRANS)
    [v] = check_expectation(expectation("retransmits(bbr_cws) <= 0.5 * retransmits(bbr)"), points(runs, groups))
    assert v.point == "across points" and v.verdict == "pass"
    assert v.values["retransmits(bbr_cws)"][0] == pytest.approx((100 + 5) / 2)  # rep 0: mean over buffers
    [shallow] = check_expectation(expectation("retransmits(bbr_cws) <= 0.1 * retransmits(bbr)", buffer_bdp=0.5),
                                  points(runs, groups))
    assert shallow.verdict == "fail"


def test_a_claim_without_data_is_no_data_and_says_what_is_missing():
    runs, groups = sweep_tables(JAIN, RETRANS)
    verdicts = check_expectation(Expectation.from_entry("sweep", {"claim": "queue_delay_ms < 5"}), points(runs, groups))
    assert len(verdicts) == 4  # one per point, none measured the queue
    assert all(v.verdict == "no data" and "queue_delay_ms" in v.reason for v in verdicts)
    [other] = check_expectation(Expectation.from_entry("elsewhere", {"claim": "jain < 1"}), points(runs, groups))
    # no run of the scenario at all: not run (reported, never a gate failure by itself)
    assert other.verdict == "not run" and "no runs of elsewhere" in other.reason


# --- the commands on recorded VM runs --------------------------------------------------------


DEMO = "demo-cubic-bbr-20261122-232527-base-r0"  # health pass: CUBIC vs BBR, 20 Mbit/s, 2 BDP
SICK = "cubic-bbr-shallow-20261121-231855-base-r0"  # health fail: base RTT +11 %, goodput 86.7 %


def recorded(tmp_path: Path, fixture: str, expect: list[dict], name: str = "run", checks: dict | None = None,
             repetition: int | None = None, repetitions: int | None = None) -> Path:
    """A copy of a recorded VM run whose scenario.yaml carries `expect` (and optionally other
    checks.json content or repetition index); returns the directory that holds the copies."""
    run = tmp_path / "runs" / name
    shutil.copytree(FIXTURES / fixture, run)
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    resolved["expect"] = expect
    if repetitions is not None:
        resolved["repetitions"] = repetitions
    (run / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    if checks is not None:
        (run / "checks.json").write_text(json.dumps(checks))
    if repetition is not None:
        meta = json.loads((run / "meta.json").read_text())
        meta["repetition"], meta["run_id"] = repetition, f"{meta.get('run_id', name)}-{repetition}"
        (run / "meta.json").write_text(json.dumps(meta))
    return tmp_path / "runs"


@pytest.fixture
def recorded_with_claims(tmp_path):
    """The recorded demo run (CUBIC vs BBR, 20 Mbit/s, 2 BDP, virtual clock: BBR got 0.544) with claims."""
    return recorded(tmp_path, DEMO, [{"claim": "share(bbr) > 0.7", "source": "000 Table 2"},
                                     {"claim": "0.4 < share(cubic) < 0.6"}])


def test_check_imports_no_figure_library(recorded_with_claims, tmp_path):
    """`cctest check` measures and judges with analysis/ alone: plotly (report/, the figures) stays unimported."""
    args = ["check", str(recorded_with_claims), "-o", str(tmp_path / "claims.json"), "--no-fail", "--recorded-claims"]
    code = ("import sys\nfrom click.testing import CliRunner\nfrom cctest.cli.main import main\n"
            f"result = CliRunner().invoke(main, {args!r})\n"
            "print(result.exit_code, sorted(m for m in sys.modules if m.split('.')[0] == 'plotly'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "0 []"


def test_check_judges_recorded_runs_and_exits_3_on_a_failed_claim(recorded_with_claims, tmp_path):
    out = tmp_path / "claims.json"
    result = CliRunner().invoke(main, ["check", str(recorded_with_claims), "-o", str(out), "--recorded-claims"])
    assert result.exit_code == 3, result.output
    claims = json.loads(out.read_text())
    verdicts = {c["claim"]: c for c in claims["claims"]}
    assert verdicts["share(bbr) > 0.7"]["verdict"] == "fail"
    assert verdicts["share(bbr) > 0.7"]["values"]["share(bbr)"]["mean"] == pytest.approx(0.544, abs=0.01)
    assert verdicts["share(bbr) > 0.7"]["source"] == "000 Table 2"
    assert verdicts["0.4 < share(cubic) < 0.6"]["verdict"] == "pass"
    assert claims["counts"] == {"pass": 1, "fail": 1, "inconclusive": 0, "incomplete": 0, "no data": 0,
                                "not run": 0}
    assert claims["statuses"] == {"pass": 1, "fail": 1, "known-fail": 0, "unexpected-pass": 0,
                                  "inconclusive": 0, "incomplete": 0, "not-run": 0}
    assert [r["status"] for r in claims["results"]] == ["fail", "pass"]
    args = ["check", str(recorded_with_claims), "-o", str(out), "--no-fail", "--recorded-claims"]
    assert CliRunner().invoke(main, args).exit_code == 0


def test_report_puts_claims_first_and_writes_claims_json(recorded_with_claims, tmp_path):
    html = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(main, ["report", str(recorded_with_claims), "-o", str(html), "--recorded-claims"])
    assert result.exit_code == 3, result.output
    page = html.read_text()
    assert page.index("id='claims'") < page.index("id='overview'")
    assert json.loads((html.parent / "report.claims.json").read_text())["counts"]["fail"] == 1
    args = ["report", str(recorded_with_claims), "-o", str(html), "--no-fail", "--recorded-claims"]
    assert CliRunner().invoke(main, args).exit_code == 0


# --- known findings: the gate goes red only when a result changes ------------------------------

KNOWN = {"triage": "implementation", "reason": "BBR's share 0.544 here (test)"}


@pytest.mark.parametrize("claim, known, status, code", [
    ("share(bbr) > 0.7", None, "fail", 3),  # a failure nobody expected
    ("share(bbr) > 0.7", KNOWN, "known-fail", 0),  # a known failure that still fails
    ("share(bbr) > 0.5", KNOWN, "unexpected-pass", 3),  # a known failure that now passes: changed
    ("share(bbr) > 0.5", None, "pass", 0),
])
def test_check_exits_non_zero_only_when_a_result_changed(tmp_path, claim, known, status, code):
    entry = {"claim": claim, **({"known": known} if known else {})}
    runs = recorded(tmp_path, DEMO, [entry])
    out = tmp_path / "claims.json"
    result = CliRunner().invoke(main, ["check", str(runs), "-o", str(out), "--recorded-claims"])
    assert result.exit_code == code, result.output
    [judged] = json.loads(out.read_text())["results"]
    assert judged["status"] == status
    first, second = result.output.splitlines()[:2]
    assert first == "judging the runs with the claims recorded in their scenario.yaml (--recorded-claims)"
    assert second.startswith(status.upper())
    if known:
        assert judged["known"] == KNOWN and "known, implementation" in result.output


def test_the_same_claim_on_changed_results_changes_the_gate():
    """One expectation, judged on last night's and tonight's tables: a pass that now fails and a known
    failure that now passes both gate; a known failure that still fails does not."""
    from cctest.analysis.claims import Known, results

    before, after = dict(JAIN), dict(JAIN)
    after[(0.5, "bbr_cws")] = [0.62, 0.65, 0.63]  # BBR-CWS lost its fairness at 0.5 BDP
    claim = {"claim": "jain >= 0.9", "where": {"buffer_bdp": 0.5, "flows.1.cc": "bbr_cws"}}
    plain = Expectation.from_entry("sweep", claim)
    known = Expectation.from_entry("sweep", {**claim, "known": {"triage": "setting", "reason": "r"}})
    assert isinstance(known.known, Known)

    def status(e, jain):
        [r] = results(check_expectation(e, points(*sweep_tables(jain, RETRANS))))
        return r.status, r.gates

    assert status(plain, before) == ("pass", False)
    assert status(plain, after) == ("fail", True)
    assert status(known, after) == ("known-fail", False)
    assert status(known, before) == ("unexpected-pass", True)


@pytest.mark.parametrize("known, says", [
    ("{triage: bug, reason: x}",
     "key expect.0.known.triage: Input should be 'implementation', 'spec', 'setting' or 'paper'"),
    # a scaled-down run is no triage: at the paper's scale a claim passes or fails
    ("{triage: scale, reason: x}", "key expect.0.known.triage: scale is no triage: run the claim at the paper's scale"),
    ("{triage: setting}", "key expect.0.known.reason: Field required"),
    ("{triage: setting, reason: x, why: y}", "key expect.0.known.why: unknown key"),
    ("setting", "key expect.0.known: Input should be a valid dictionary"),
])
def test_a_bad_known_is_one_line_exit_2_naming_file_scenario_key_and_allowed(tmp_path, known, says):
    f = tmp_path / "e.yaml"
    f.write_text(experiments_with("jain < 1", f", known: {known}"))
    result = CliRunner().invoke(main, ["list", "-f", str(f)])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert f"{f}: scenario sweep: " in line and says in line, line


# --- health: a failed-health run makes its claim inconclusive ---------------------------------


def test_a_failed_health_run_makes_its_claim_inconclusive_naming_the_check(tmp_path):
    runs = recorded(tmp_path, SICK, [{"claim": "share(bbr) < 0.6"}])  # holds on the data: 0.504
    out = tmp_path / "claims.json"
    result = CliRunner().invoke(main, ["check", str(runs), "-o", str(out), "--recorded-claims"])
    assert result.exit_code == 0, result.output  # inconclusive neither passes nor fails the gate
    [point] = json.loads(out.read_text())["claims"]
    assert point["verdict"] == "inconclusive"
    assert "health fail" in point["reason"] and "base_rtt 22.2 vs 20" in point["reason"]
    assert point["unhealthy_runs"] and "goodput" in point["unhealthy_runs"][0]
    assert result.output.splitlines()[1].startswith("INCONCLUSIVE") and "base_rtt" in result.output


def test_failed_health_runs_are_left_out_of_the_statistics(tmp_path):
    """Three repetitions of one point, the third with a failed health verdict: the values are the
    two healthy runs', the point is inconclusive and names the one left out."""
    sick = {"verdict": "fail", "checks": [{"name": "drops_outside_bottleneck", "ok": False, "measured": 12,
                                           "expected": 0, "detail": "test"}]}
    expect = [{"claim": "share(bbr) > 0.5"}]
    for rep in range(3):
        runs = recorded(tmp_path, DEMO, expect, name=f"r{rep}", repetition=rep, checks=sick if rep == 2 else None,
                        repetitions=3)
    out = tmp_path / "claims.json"
    result = CliRunner().invoke(main, ["check", str(runs), "-o", str(out), "--recorded-claims"])
    assert result.exit_code == 0, result.output
    [point] = json.loads(out.read_text())["claims"]
    assert point["values"]["share(bbr)"]["n"] == 2
    assert point["verdict"] == "inconclusive"
    assert "drops_outside_bottleneck 12 vs 0" in point["reason"] and "healthy runs alone: pass" in point["reason"]
    assert len(point["unhealthy_runs"]) == 1
    assert point["unhealthy_runs"][0].endswith("-2 (drops_outside_bottleneck 12 vs 0)")


def test_check_without_claims_is_bad_input(tmp_path):
    shutil.copytree(FIXTURES / "cubic-bbr-shallow-20261121-231855-base-r0", tmp_path / "run")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "run"), "-o", str(tmp_path / "c.json"),
                                       "--recorded-claims"])
    assert result.exit_code == 2 and "no claims" in result.output


def test_readme_examples_of_experiments_yaml_load():
    """The experiments.yaml examples (docs/experiments.md's reference, README's first experiment:
    keys, a claim) are what the loader accepts."""
    repo = REPO
    reference = (repo / "docs" / "experiments.md").read_text()
    blocks = reference.split("# experiments.yaml", 1)[1].split("```yaml\n")[1:3]
    full = blocks[0].split("```")[0]
    experiments = parse_experiments(full, "docs/experiments.md")
    assert experiments.get("my-scenario").expect[0].claim == "share(bbr_cws) < 0.7"
    readme = (repo / "README.md").read_text()
    first = readme.split("## A first experiment", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    assert parse_experiments(first, "README.md").get("first").expect[0].claim == "jain > 0.9"


def test_startup_time_is_read_from_the_modules_mode_trace():
    from cctest.analysis.metrics import startup_exit_s

    spans = pd.DataFrame({"flow": [0, 1, 2], "t_start": [0.1, 2.0, 0.0], "t_end": [10.0, 10.0, 10.0]})
    state = pd.DataFrame({"flow": [0, 0, 0, 1, 1], "t_s": [0.2, 0.6, 0.9, 2.1, 2.4],
                          "cc": ["bbr3"] * 3 + ["bbr3plus"] * 2, "key": ["mode", "mode", "mode", "mode", "cwnd"],
                          "value": [0.0, 1.0, 2.0, 0.0, 10.0]})
    out = startup_exit_s(state, spans)
    assert out[0] == pytest.approx(0.5)  # Startup (0) until 0.6 s, the flow began at 0.1 s
    assert np.isnan(out[1])  # traced, never left Startup
    assert 2 not in out  # no mode trace: a kernel cc
    assert parse("startup_s(bbr3plus) < startup_s(bbr3)").ccs == {"bbr3", "bbr3plus"}


def test_a_cc_that_delivered_nothing_has_throughput_zero_not_no_data():
    runs, groups = sweep_tables(JAIN, RETRANS)
    groups.loc[groups["cc"] == "cubic", "mean_mbps"] = 0.0  # CUBIC starved in every run
    verdicts = check_expectation(expectation("throughput(cubic) < 1", buffer_bdp=0.5), points(runs, groups))
    assert [v.verdict for v in verdicts] == ["pass", "pass"]
    assert verdicts[0].values["throughput(cubic)"][0] == 0.0


# --- aggregation over points, the steady window, per-cc queueing delay -------------------------


@pytest.mark.parametrize("at_least, verdict", [(None, "fail"), (2, "pass"), (3, "inconclusive"), (4, "fail")])
def test_at_least_k_points_decides_most_cases(at_least, verdict):
    """`jain > 0.7` over four points: two pass, one fails (0.62-0.65), one straddles (0.75-0.90)."""
    from cctest.analysis.claims import results

    entry = {"claim": "jain > 0.7", **({"at_least": at_least} if at_least else {})}
    verdicts = check_expectation(Expectation.from_entry("sweep", entry), points(*sweep_tables(JAIN, RETRANS)))
    assert sorted(v.verdict for v in verdicts) == ["fail", "inconclusive", "pass", "pass"]
    [r] = results(verdicts)
    assert r.verdict == verdict
    assert "2 of 4 points pass" in r.reason


def test_at_least_more_than_the_points_selected_is_bad_input():
    with pytest.raises(ScenarioError) as error:
        parse_experiments(experiments_with("jain < 1", ", where: {buffer_bdp: 0.5}, at_least: 3"), "x.yaml")
    assert "at_least: 3 is more than the 2 matrix point(s) it selects" in str(error.value)


def test_steady_from_s_re_measures_the_steady_window(tmp_path):
    """At the report's own skip it gives the report's jain_steady; later, the window's own value."""
    from cctest.analysis.load import load_runs
    from cctest.report.build import Options, analyse, judge_claims

    runs = recorded(tmp_path, DEMO, [{"claim": "jain_steady > 0", "steady_from_s": 10},
                                     {"claim": "jain_steady > 0", "steady_from_s": 15},
                                     {"claim": "steady_share(bbr) > 0", "steady_from_s": 10},
                                     {"claim": "jain_steady > 0"}])
    loaded, res, summary = analyse(load_runs([runs]), Options(skip_s=10), [])
    at10, at15, share10, default = judge_claims(loaded, res)[0]
    report = summary.runs["jain_steady"].iloc[0]
    assert at10.values["jain_steady"][0] == pytest.approx(report, abs=1e-9)
    assert default.values["jain_steady"][0] == pytest.approx(report, abs=1e-9)
    assert share10.values["steady_share(bbr)"][0] == pytest.approx(
        summary.groups.set_index("cc").loc["bbr", "steady_share"], abs=1e-9)
    assert at15.values["jain_steady"][0] != pytest.approx(report, abs=1e-6)
    # without the series (claims judged on tables alone) the term is missing, and says why
    from cctest.analysis.run_point import points_of

    [alone] = check_expectation(at15.expectation, points_of(loaded, res, with_series=False))
    assert alone.verdict == "no data" and "steady_from_s" in alone.reason


def test_steady_from_s_needs_a_steady_term():
    with pytest.raises(ScenarioError) as error:
        parse_experiments(experiments_with("jain < 1", ", steady_from_s: 5"), "x.yaml")
    assert "key expect.0.steady_from_s: the claim names no steady-state term" in str(error.value)


def test_qdelay_is_the_mean_queueing_delay_of_a_ccs_flows():
    runs, groups = sweep_tables(JAIN, RETRANS)
    groups["mean_qdelay_ms"] = groups["cc"].map({"cubic": 9.0, "bbr": 30.0, "bbr_cws": 12.0})
    [v] = check_expectation(expectation("qdelay(bbr_cws) <= 0.46 * qdelay(bbr)"), points(runs, groups))
    assert v.point == "across points" and v.verdict == "pass"
    assert v.values["0.46 * qdelay(bbr)"][0] == pytest.approx(0.46 * 30.0)


def test_qdelay_of_a_recorded_run_is_its_flows_srtt_above_their_min_rtt(tmp_path):
    from cctest.analysis.load import load_runs
    from cctest.report.build import Options, analyse

    _, _, summary = analyse(load_runs([recorded(tmp_path, DEMO, [])]), Options(), [])
    flows = summary.flows.set_index("cc")["mean_qdelay_ms"]
    groups = summary.groups.set_index("cc")["mean_qdelay_ms"]
    assert groups["bbr"] == pytest.approx(flows["bbr"]) and groups["cubic"] == pytest.approx(flows["cubic"])
    assert 0 < groups["bbr"] < 2 * 20  # a 2 BDP buffer at 20 ms holds at most 40 ms of queue


# --- docs/reproduction.md: generated from run directories ----------------------------------------



def paper_claims() -> list[tuple[str, str]]:
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(REPO / "experiments.yaml")
    return [(name, e.claim) for name, s in experiments.scenarios.items()
            if any(t.startswith("paper-") for t in s.tags) for e in s.expect]


def quick_claims() -> list[tuple[str, str]]:
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(REPO / "experiments.yaml")
    return [(name, e.claim) for name, s in experiments.scenarios.items()
            if any(t.startswith("quick-") for t in s.tags) for e in s.expect]


def reading_claims() -> list[tuple[str, str]]:
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(REPO / "experiments.yaml")
    return [(name, e.claim) for name, s in experiments.scenarios.items()
            if any(t.startswith("reading-") for t in s.tags) for e in s.expect]


def sanity_claims() -> list[tuple[str, str]]:
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(REPO / "experiments.yaml")
    return [(name, e.claim) for name, s in experiments.scenarios.items()
            if any(t.startswith("paper-") for t in s.tags) for e in s.expect if e.sanity]


def test_the_reproduction_page_lists_every_paper_claim_never_run_ones_included(tmp_path):
    """The recorded fixtures run no suite scenario: every claim is on the page, as not run."""
    page, readme = tmp_path / "reproduction.md", tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- reproduction-score --> (to be filled)\n\nrest\n")
    result = CliRunner().invoke(main, ["check", str(FIXTURES), "--markdown", str(page), "--readme", str(readme),
                                       "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    claims = paper_claims()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    # the scaled-down suites' and the other readings' in tables of their own
    assert len(rows) == len(claims) + len(quick_claims()) + len(reading_claims())
    for name, claim in claims:
        assert any(f"`{name}`" in row and f"`{claim}`" in row.replace("\\|", "|") and "| not run |" in row
                   for row in rows), (name, claim)
    suites = load_experiments(REPO / "experiments.yaml").suites
    assert len(suites) >= 5  # the seed papers, and any suite added since
    for tag, suite in suites.items():
        assert f"## {suite.title}\n" in text and f"--tag {tag} --out results/{tag}" in text
    sanity = len(sanity_claims())
    scored = len(claims) - sanity
    score = (f"0 of {scored} claims pass (0 known failure(s); 0 fail; 0 inconclusive; 0 incomplete; {scored} not run); "
             f"sanity checks outside the score: 0 of {sanity} pass")
    assert f"**Score: {score}.**" in text
    assert readme.read_text().splitlines()[2] == (f"<!-- reproduction-score --> **Reproduction of the seed papers:** "
                                                  f"{score}: [reproduction.md](reproduction.md).")


def test_the_reproduction_page_shows_measured_claims_with_their_status_and_triage(tmp_path):
    """A recorded run relabelled as a suite scenario's point: its claim shows our value, n and status;
    a known failure shows its triage and reason."""
    run = tmp_path / "results" / "paper-002" / "modest-vs-bbr" / "run-r0"
    shutil.copytree(FIXTURES / DEMO, run)
    meta = json.loads((run / "meta.json").read_text())
    meta["scenario"], meta["matrix"] = "modest-vs-bbr", {}
    meta["engine"] = {"name": "uml"}  # measured on the UML engine: the page says so and how to redo it
    (run / "meta.json").write_text(json.dumps(meta))
    # a suite's run records its scenario's tags; a copy without them (a targeted run that shares the
    # scenario's name, as under results/targeted/) is left out of the page
    untagged = tmp_path / "results" / "targeted" / "modest-vs-bbr" / "run-r0"
    shutil.copytree(run, untagged)
    (run / "scenario.yaml").write_text("tags: [quick-002]\n" + (run / "scenario.yaml").read_text())
    for rep in (1, 2):  # the scenario declares 3 repetitions: a verdict needs all three
        copy = run.with_name(f"run-r{rep}")
        shutil.copytree(run, copy)
        meta["repetition"], meta["run_id"] = rep, f"{meta['run_id']}-{rep}"
        (copy / "meta.json").write_text(json.dumps(meta))
    f = tmp_path / "experiments.yaml"
    shutil.copyfile(REPO / "experiments.yaml", f)
    shutil.copytree(REPO / "suites", tmp_path / "suites")
    # the demo ran cubic and bbr: the claims name bbr_modest, so only a bbr claim can be judged; add one
    suite = tmp_path / "suites" / "paper-002.yaml"
    marker = '      - claim: "0.4 < share(bbr_modest) < 0.5"'
    suite.write_text(suite.read_text().replace(marker, '      - claim: "share(bbr) > 0.9"\n        source: "002 test"\n'
                                               '        paper: "0.93"\n'
                                               '        known: {triage: setting, reason: "a test reason"}\n'
                                               + marker, 1))
    page = tmp_path / "reproduction.md"
    result = CliRunner().invoke(main, ["check", str(tmp_path / "results"), "--markdown", str(page), "-f", str(f),
                                       "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 3, result.output  # the two Modest claims have no data: bbr_modest never ran
    rows = {line.split(" | ")[0]: line for line in page.read_text().splitlines()
            if line.startswith("| `modest-vs-bbr`")}
    known = rows["| `modest-vs-bbr`: `share(bbr) > 0.9`"]
    # the untagged copy left out
    assert "| 0.93 | share(bbr) = 0.544 ± 0 | 3 | known fail | setting | a test reason |" in known
    assert "1 run(s) without a paper-00N, quick-00N or reading-00N tag" in result.output
    retrans = "0.4 * retrans_per_mb(bbr) < retrans_per_mb(bbr_modest) < 0.6 * retrans_per_mb(bbr)"
    assert "untriaged" in rows[f"| `modest-vs-bbr`: `{retrans}`"]
    # experiments.yaml's triage
    assert "| **fail** | paper |" in rows["| `modest-vs-bbr`: `0.4 < share(bbr_modest) < 0.5`"]
    text = page.read_text()
    assert "Measured on: uml" in text
    # no -n: the scenarios' declared repetitions are the n their verdicts are judged on
    assert "`cctest run --vm --engine uml -j 2 --tag paper-002 --out results/paper-002`" in text
    assert "`cctest run --vm -j 2 --tag paper-000 --out results/paper-000`" in text  # not run: the default


def test_the_committed_reproduction_page_and_readme_agree_with_experiments_yaml():
    """docs/reproduction.md is generated (docs/papers.md, "Publishing the reproduction"): it lists
    every paper claim of experiments.yaml, and README's front-page score line is the page's."""
    text = (REPO / "docs" / "reproduction.md").read_text()
    rows = [line.replace("\\|", "|") for line in text.splitlines() if line.startswith("| `")]
    for name, claim in paper_claims():
        assert any(f"`{name}`" in row and f"`{claim}`" in row for row in rows), (name, claim)
    assert len(rows) == len(paper_claims()) + len(quick_claims()) + len(reading_claims())
    score = text.split("**Score: ", 1)[1].split(".**", 1)[0]
    readme = (REPO / "README.md").read_text()
    assert f"<!-- reproduction-score --> **Reproduction of the seed papers:** {score}: " \
           "[docs/reproduction.md](docs/reproduction.md)." in readme


# --- the protocol: fixed n, one build, races, bounded intervals, one judge ----------------------

PROTOCOL_EXPERIMENTS = """
scenarios:
  race:
    tags: [paper-001]
    link: {rate_mbps: 20, rtt_ms: 10, buffer_bdp: 1}
    flows: [{cc: bbr, rtt_ms: 10}, {cc: cubic, rtt_ms: 10}]
    duration_s: 12
    repetitions: 3
    expect:
      - claim: "share(bbr) > 0.5"
      - claim: "share(bbr) > 0.5"
        at_least_runs: 2
      - claim: "jain < 0.9"
        sanity: true
"""


def protocol_runs(root: Path, reps=(0, 1, 2), build=None, tags="[paper-001]") -> Path:
    """Fixture runs of the scenario `race` (report_fixtures), each recording its suite's tag and a
    module build (`build`: repetition -> sha256 of bbr's module)."""
    from tests.report_fixtures import FlowSpec, RunSpec, make_run

    for rep in reps:
        run = make_run(root, RunSpec(scenario="race", flows=[FlowSpec("bbr", 10), FlowSpec("cubic", 10)],
                                     duration_s=12, repetition=rep, seed=10 + rep, noise=0.6))
        (run / "scenario.yaml").write_text(f"name: race\ntags: {tags}\n")
        if build:
            meta = json.loads((run / "meta.json").read_text())
            meta["modules"] = [{"name": "bbr_x", "sha256": build[rep], "loaded_by_cctest": True}]
            (run / "meta.json").write_text(json.dumps(meta))
    return root


def test_a_point_of_two_module_builds_is_refused_and_nothing_is_written(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(PROTOCOL_EXPERIMENTS)
    runs = protocol_runs(tmp_path / "runs", build={0: "a" * 64, 1: "a" * 64, 2: "b" * 64})
    out = tmp_path / "claims.json"
    result = CliRunner().invoke(main, ["check", str(runs), "-f", str(f), "-o", str(out)])
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert "two builds of bbr_x: aaaaaaaaaaaa" in last and "bbbbbbbbbbbb" in last, last
    assert not out.exists()


def test_a_point_is_judged_on_its_declared_n_only(tmp_path):
    """Two of three declared runs: incomplete, never a pass; a fourth run (index 3) is ignored, with a note."""
    f = tmp_path / "e.yaml"
    f.write_text(PROTOCOL_EXPERIMENTS)
    out = tmp_path / "claims.json"
    runs = protocol_runs(tmp_path / "two", reps=(0, 1))
    result = CliRunner().invoke(main, ["check", str(runs), "-f", str(f), "-o", str(out)])
    plain = json.loads(out.read_text())["results"][0]
    assert plain["status"] == "incomplete" and "incomplete (2 of 3)" in plain["reason"], result.output
    runs = protocol_runs(tmp_path / "four", reps=(0, 1, 2, 3))
    CliRunner().invoke(main, ["check", str(runs), "-f", str(f), "-o", str(out)])
    [point] = [c for c in json.loads(out.read_text())["claims"] if c["claim"] == "share(bbr) > 0.5"][:1]
    assert point["values"]["share(bbr)"]["n"] == 3 and "repetition 3 ignored" in point["reason"]


def test_a_point_short_of_its_n_is_incomplete_even_where_its_runs_lack_the_metric():
    """A campaign's first run of a point, not yet ingested, measures nothing: the point is incomplete, not failed."""
    from cctest.analysis.claims import Expectation, check_expectation

    e = Expectation.from_entry("s", {"claim": "share(bbr) > 0.5"}, (), 5)
    runs = pd.DataFrame([{"run_id": "r0", "scenario": "s", "repetition": 0, "group": "g", "group_label": "s"}])
    groups = pd.DataFrame([{"run_id": "r0", "cc": "bbr", "share": float("nan")}])
    [v] = check_expectation(e, points(runs, groups))
    assert v.verdict == "incomplete" and "incomplete (1 of 5)" in v.reason and "share(bbr)" in v.reason, v.reason
    full = pd.DataFrame([{"run_id": f"r{k}", "scenario": "s", "repetition": k, "group": "g", "group_label": "s"}
                         for k in range(5)])
    [v] = check_expectation(e, points(full, pd.DataFrame([{"run_id": f"r{k}", "cc": "bbr", "share": float("nan")}
                                                          for k in range(5)])))
    assert v.verdict == "no data"  # all n runs and still nothing measured: a failure to say


def test_a_race_is_judged_on_its_runs_and_shows_each(tmp_path):
    from cctest.analysis.claims import Expectation, check_expectation

    e = Expectation.from_entry("race", {"claim": "share(bbr) > 0.5", "at_least_runs": 2}, (), 3)
    shares = {0: 0.9, 1: 0.3, 2: 0.95}  # a coin toss: the mean 0.72 +- 0.83 says nothing of any run
    runs = pd.DataFrame([{"run_id": f"r{k}", "scenario": "race", "repetition": k, "group": "g", "group_label": "race"}
                         for k in shares])
    groups = pd.DataFrame([{"run_id": f"r{k}", "cc": "bbr", "share": v} for k, v in shares.items()])
    [v] = check_expectation(e, points(runs, groups))
    assert v.verdict == "pass" and "r0 0.9 holds; r1 0.3 fails; r2 0.95 holds (2 of 3 hold, 2 needed)" in v.measured()
    [v] = check_expectation(e, points(runs[runs["repetition"] < 2], groups))
    assert v.verdict == "incomplete"  # one win, one run to come: undecided
    groups.loc[2, "share"] = 0.1
    [v] = check_expectation(e, points(runs, groups))
    assert v.verdict == "fail"


def test_an_interval_of_a_bounded_metric_stays_in_its_range():
    """Jain 0.671, 0.605, 0.984: the t-interval is 0.753 +- 0.503; judged and shown, it ends at 1."""
    from cctest.analysis.claims import Expectation, check_expectation

    e = Expectation.from_entry("s", {"claim": "jain < 1.2"}, (), 3)
    runs = pd.DataFrame([{"run_id": f"r{k}", "scenario": "s", "repetition": k, "group": "g", "group_label": "s",
                          "jain": j} for k, j in enumerate((0.671, 0.605, 0.984))])
    [v] = check_expectation(e, points(runs, pd.DataFrame()))
    assert v.verdict == "pass"  # the unclipped interval reaches 1.26 and would straddle 1.2
    assert "jain = 0.753 [0.25, 1] (n=3)" in v.measured()


def test_check_report_and_the_page_agree_on_the_same_runs(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(PROTOCOL_EXPERIMENTS)
    runs = protocol_runs(tmp_path / "runs")
    out, html, page = tmp_path / "c.json", tmp_path / "r.html", tmp_path / "page.md"
    check = CliRunner().invoke(main, ["check", str(runs), "-f", str(f), "-o", str(out), "--no-fail"])
    report = CliRunner().invoke(main, ["report", str(runs), "-f", str(f), "-o", str(html), "--no-fail"])
    CliRunner().invoke(main, ["check", str(runs), "-f", str(f), "-o", str(tmp_path / "p.json"), "--markdown",
                              str(page), "--no-fail"])
    first = f"judging the runs with the claims of {f} (known: included)"
    assert check.output.splitlines()[0] == first and report.output.splitlines()[0] == first
    score = [line for line in check.output.splitlines() if line.startswith("score: ")]
    assert score and score == [line for line in report.output.splitlines() if line.startswith("score: ")]
    assert f"**Score: {score[0].removeprefix('score: ')}.**" in page.read_text()
    assert "- `race`: `qemu 6.1.0-synthetic`" in page.read_text()  # the builds a scored scenario's runs ran
    statuses = json.loads(out.read_text())["statuses"]
    assert statuses == json.loads(html.with_suffix(".claims.json").read_text())["statuses"]
    assert statuses == json.loads((tmp_path / "p.json").read_text())["statuses"]
    assert "sanity checks outside the score: " in score[0] and "of 2 claims pass" in score[0]


def test_without_an_experiments_file_here_the_recorded_claims_judge_and_the_first_line_says_so(
        recorded_with_claims, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside a checkout: no experiments.yaml
    result = CliRunner().invoke(main, ["check", str(recorded_with_claims), "-o", str(tmp_path / "c.json"), "--no-fail"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == ("judging the runs with the claims recorded in their scenario.yaml "
                                             "(no experiments.yaml here)")
    named = CliRunner().invoke(main, ["check", str(recorded_with_claims), "-f", "mine.yaml",
                                      "-o", str(tmp_path / "d.json")])
    assert named.exit_code == 2 and "mine.yaml: no such experiments file" in named.output
