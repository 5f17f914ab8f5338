"""experiments.yaml validation: every mistake is one line naming file, scenario, key and what is allowed."""

import subprocess
import sys

import pytest

from cctest.model.scenario import ScenarioError, load_experiments, parse_experiments
from tests import REPO

GOOD = """
defaults:
  link: {rate_mbps: 20, rtt_ms: 10, buffer_bdp: 1}
  duration_s: 10
scenarios:
  one:
    flows: [{cc: cubic}, {cc: bbr, count: 2, rtt_ms: 40, start_s: 2}]
"""


def error_of(text: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        parse_experiments(text, "exp.yaml")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("exp.yaml")
    return message


def test_defaults_merge_under_scenarios():
    experiments = parse_experiments(GOOD, "exp.yaml")
    scenario = experiments.get("one")
    assert scenario.link.rate_mbps == 20
    assert scenario.duration_s == 10
    assert scenario.flow_count == 3
    assert scenario.capture.ss_interval_ms == 100


def test_unknown_key_names_scenario_and_key():
    message = error_of(GOOD.replace("{cc: cubic}", "{cc: cubic, colour: red}"))
    assert "scenario one" in message and "flows.0.colour" in message and "unknown key" in message


def test_unknown_congestion_control_lists_allowed():
    message = error_of(GOOD.replace("cc: cubic", "cc: vegas2"))
    assert "flows.0.cc" in message and "vegas2" in message and "bbr_cws" in message and "cubic" in message


def test_wrong_type():
    message = error_of(GOOD.replace("duration_s: 10", "duration_s: soon"))
    assert "key duration_s" in message


def test_negative_rate():
    message = error_of(GOOD.replace("rate_mbps: 20", "rate_mbps: -5"))
    assert "link.rate_mbps" in message and "greater than or equal to 0.01" in message


def test_buffer_smaller_than_a_packet():
    message = error_of(GOOD.replace("buffer_bdp: 1", "buffer_bdp: 0.001"))
    assert "less than one packet" in message and "1514" in message


def test_both_buffer_notations_rejected():
    message = error_of(GOOD.replace("buffer_bdp: 1", "buffer_bdp: 1, buffer_bytes: 50000"))
    assert "only one of buffer_bdp or buffer_bytes" in message


def test_flow_longer_than_scenario():
    message = error_of(GOOD.replace("start_s: 2", "start_s: 2, duration_s: 9"))
    assert "exceeds" in message and "flows.1" in message


def test_flows_sharing_a_module_must_share_params():
    text = GOOD.replace("[{cc: cubic}, {cc: bbr, count: 2, rtt_ms: 40, start_s: 2}]",
                        "[{cc: bbr_cws, params: {beta_pct: 90}}, {cc: bbr_cws, params: {beta_pct: 80}}]")
    assert "same params" in error_of(text)


def test_unknown_top_level_key_and_bad_yaml():
    assert "unknown top-level key scenarioz" in error_of(GOOD.replace("scenarios:", "scenarioz:"))
    assert "not valid YAML" in error_of("scenarios: [unclosed")


def test_missing_scenario_lists_defined_ones():
    experiments = parse_experiments(GOOD, "exp.yaml")
    with pytest.raises(ScenarioError, match="no scenario named 'two'; defined: one"):
        experiments.get("two")


def test_shipped_experiments_file_is_valid():
    experiments = load_experiments(REPO / "experiments.yaml")
    for name in ("demo", "shallow-10ms-1v1", "deep-10ms-1v1", "shallow-40ms-1v1", "deep-40ms-1v1",
                 "shallow-10ms-3v3", "deep-10ms-3v3", "bbr3plus-simultaneous", "bbr3plus-staggered"):
        assert name in experiments.scenarios
    demo = experiments.get("demo")
    # in the papers' regime (faithful in the VM on its virtual clock), and short enough for a first try
    assert demo.link.rate_mbps >= 20 and demo.duration_s <= 30
    assert experiments.get("deep-10ms-1v1").link.buffer_bdp == 5
    assert experiments.get("shallow-10ms-3v3").flow_count == 6


def test_cli_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("rate_mbps: 20", "rate_mbps: 0"))
    result = subprocess.run([sys.executable, "-m", "cctest", "run", "one", "-f", str(bad), "--dry-run"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert str(bad) in lines[0] and "scenario one" in lines[0] and "link.rate_mbps" in lines[0]
    assert result.stdout == ""


def test_cli_unknown_scenario_exits_2():
    result = subprocess.run([sys.executable, "-m", "cctest", "run", "nope", "--dry-run"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2
    assert "no scenario named 'nope'" in result.stderr
