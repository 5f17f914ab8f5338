"""Claims as code: the expression language, its judging with confidence intervals, and the commands
that apply it to run directories (recorded VM runs in tests/fixtures/runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cctest.claims import ClaimError, Expectation, check_expectation, judge, parse
from cctest.cli import main
from cctest.scenario import ScenarioError, parse_experiments

FIXTURES = Path(__file__).parent / "fixtures" / "runs"


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
    verdicts = check_expectation(expectation("jain < 0.8", buffer_bdp=0.5), runs, groups)
    by_point = {v.point: v.verdict for v in verdicts}
    assert by_point == {"sweep [buffer_bdp=0.5, flows.1.cc=bbr]": "pass",
                        "sweep [buffer_bdp=0.5, flows.1.cc=bbr_cws]": "fail"}
    mean, ci, n = verdicts[0].values["jain"]
    assert mean == pytest.approx(0.6333, abs=1e-3) and n == 3 and 0 < ci < 0.05
    deep = check_expectation(expectation("jain < 0.8", buffer_bdp=5, **{"flows.1.cc": "bbr"}), runs, groups)
    assert [v.verdict for v in deep] == ["inconclusive"]  # 0.75, 0.90, 0.81: the CI straddles 0.8


def test_a_claim_naming_controls_of_different_points_is_judged_across_them():
    runs, groups = sweep_tables(JAIN, RETRANS)
    [v] = check_expectation(expectation("retransmits(bbr_cws) <= 0.5 * retransmits(bbr)"), runs, groups)
    assert v.point == "across points" and v.verdict == "pass"
    assert v.values["retransmits(bbr_cws)"][0] == pytest.approx((100 + 5) / 2)  # rep 0: mean over buffers
    [shallow] = check_expectation(expectation("retransmits(bbr_cws) <= 0.1 * retransmits(bbr)", buffer_bdp=0.5),
                                  runs, groups)
    assert shallow.verdict == "fail"


def test_a_claim_without_data_is_no_data_and_says_what_is_missing():
    runs, groups = sweep_tables(JAIN, RETRANS)
    verdicts = check_expectation(Expectation.from_entry("sweep", {"claim": "queue_delay_ms < 5"}), runs, groups)
    assert len(verdicts) == 4  # one per point, none measured the queue
    assert all(v.verdict == "no data" and "queue_delay_ms" in v.reason for v in verdicts)
    [other] = check_expectation(Expectation.from_entry("elsewhere", {"claim": "jain < 1"}), runs, groups)
    assert other.verdict == "no data" and "no runs of elsewhere" in other.reason


# --- the commands on recorded VM runs --------------------------------------------------------


@pytest.fixture
def recorded_with_claims(tmp_path):
    """The recorded CUBIC vs BBR run (10 Mbit/s, 0.5 BDP, the wall clock: BBR got only half) with claims."""
    run = tmp_path / "runs" / "cubic-bbr"
    shutil.copytree(FIXTURES / "cubic-bbr-shallow-20261121-231855-base-r0", run)
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    resolved["expect"] = [{"claim": "share(bbr) > 0.7", "source": "000 Table 2"},
                          {"claim": "0.4 < share(cubic) < 0.6"}]
    (run / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    return tmp_path / "runs"


def test_check_judges_recorded_runs_and_exits_3_on_a_failed_claim(recorded_with_claims, tmp_path):
    out = tmp_path / "claims.json"
    result = CliRunner().invoke(main, ["check", str(recorded_with_claims), "-o", str(out)])
    assert result.exit_code == 3, result.output
    claims = json.loads(out.read_text())
    verdicts = {c["claim"]: c for c in claims["claims"]}
    assert verdicts["share(bbr) > 0.7"]["verdict"] == "fail"
    assert verdicts["share(bbr) > 0.7"]["values"]["share(bbr)"]["mean"] == pytest.approx(0.504, abs=0.01)
    assert verdicts["share(bbr) > 0.7"]["source"] == "000 Table 2"
    assert verdicts["0.4 < share(cubic) < 0.6"]["verdict"] == "pass"
    assert claims["counts"] == {"pass": 1, "fail": 1, "inconclusive": 0, "no data": 0}
    assert CliRunner().invoke(main, ["check", str(recorded_with_claims), "-o", str(out), "--no-fail"]).exit_code == 0


def test_report_puts_claims_first_and_writes_claims_json(recorded_with_claims, tmp_path):
    html = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(main, ["report", str(recorded_with_claims), "-o", str(html)])
    assert result.exit_code == 3, result.output
    page = html.read_text()
    assert page.index("id='claims'") < page.index("id='overview'")
    assert json.loads((html.parent / "report.claims.json").read_text())["counts"]["fail"] == 1
    assert CliRunner().invoke(main, ["report", str(recorded_with_claims), "-o", str(html), "--no-fail"]).exit_code == 0


def test_check_without_claims_is_bad_input(tmp_path):
    shutil.copytree(FIXTURES / "cubic-bbr-shallow-20261121-231855-base-r0", tmp_path / "run")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "run"), "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 2 and "no claims" in result.output


def test_readme_examples_of_experiments_yaml_load():
    """README's experiments.yaml examples (keys, a claim) are what the loader accepts."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = readme.split("## experiments.yaml", 1)[1].split("```yaml\n")[1:3]
    full = blocks[0].split("```")[0]
    experiments = parse_experiments(full, "README.md")
    assert experiments.get("my-scenario").expect[0].claim == "share(bbr_cws) < 0.7"


def test_startup_time_is_read_from_the_modules_mode_trace():
    from cctest.metrics import startup_exit_s

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
    verdicts = check_expectation(expectation("throughput(cubic) < 1", buffer_bdp=0.5), runs, groups)
    assert [v.verdict for v in verdicts] == ["pass", "pass"]
    assert verdicts[0].values["throughput(cubic)"][0] == 0.0
