"""A suite's readings tables (suites.Readings): refused in one line naming the key where a table
names no scenario of its file, a point its scenario lacks or a term the claim language does not
have; measured like a claim at that point (declared repetitions, healthy runs); rendered into the
reproduction page. The committed page itself is checked against the records in test_compact.py."""

import math

import pytest
import yaml

from cctest.analysis.readings import Cell, measure
from cctest.analysis.run_point import RunPoint
from cctest.model.metric_table import CcValues, RunValues
from cctest.model.scenario import ScenarioError, load_experiments
from cctest.model.suites import Readings
from cctest.report.reproduction import render

SCENARIOS = {
    "core": {"tags": ["paper-005"], "link": {"rate_mbps": 10, "rtt_ms": 10, "buffer_bdp": 1},
             "flows": [{"cc": "cubic"}, {"cc": "bbr", "rtt_ms": 50}], "repetitions": 3, "duration_s": 10,
             "matrix": {"flows.*.cc": ["bbr", "cubic"], "buffer_bdp": [1, 5]}},
    "other": {"tags": ["paper-005"], "link": {"rate_mbps": 10, "rtt_ms": 10, "buffer_bdp": 1},
              "flows": [{"cc": "bbr"}, {"cc": "bbr", "rtt_ms": 50}], "repetitions": 3, "duration_s": 10,
              "matrix": {"buffer_bdp": [1, 5]}},
    "plain": {"tags": ["paper-005"], "link": {"rate_mbps": 10, "rtt_ms": 10, "buffer_bdp": 1},
              "flows": [{"cc": "bbr"}], "duration_s": 10},
}


def table(**changes) -> dict:
    readings = {"title": "Side by side",
                "columns": [{"label": "core, bbr", "scenario": "core", "where": {"flows.*.cc": "bbr"}, "cc": "bbr"},
                            {"label": "other", "scenario": "other", "cc": "bbr"}],
                "rows": [{"label": "share, 5 BDP", "term": "short_rtt_share", "where": {"buffer_bdp": 5},
                          "paper": "0.5"},
                         {"label": "retransmissions per MB", "term": "retrans_per_mb(CC)"}]}
    readings.update(changes)
    return readings


def experiments(tmp_path, readings: dict, scenarios: dict | None = None):
    (tmp_path / "suites").mkdir(exist_ok=True)
    suite = {"suite": {"tag": "paper-005", "title": "005", "readings": [readings]}, "scenarios": scenarios or SCENARIOS}
    (tmp_path / "suites" / "paper-005.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    (tmp_path / "exp.yaml").write_text("include: [suites/paper-005.yaml]\n")
    return load_experiments(tmp_path / "exp.yaml")


def test_a_table_loads_with_its_scenarios_and_points(tmp_path):
    loaded = experiments(tmp_path, table())
    (readings,) = loaded.suites["paper-005"].readings
    assert [c.scenario for c in readings.columns] == ["core", "other"]


@pytest.mark.parametrize("change, said", [
    ({"columns": [{"label": "a", "scenario": "nowhere", "cc": "bbr"}, {"label": "b", "scenario": "core", "cc": "bbr"}]},
     "key suite.readings[0].columns[0].scenario: nowhere is no scenario of this file; allowed: core, other, plain"),
    ({"columns": [{"label": "a", "scenario": "core", "where": {"buffer_bdp": 2}, "cc": "bbr"},
                  {"label": "b", "scenario": "other", "cc": "bbr"}]},
     "key suite.readings[0].columns[0].where: buffer_bdp=2 is not a point of core; allowed: 1, 5"),
    ({"columns": [{"label": "a", "scenario": "core", "cc": "bbr"}, {"label": "b", "scenario": "plain", "cc": "bbr"}],
      "rows": [{"label": "r", "term": "jain", "where": {"buffer_bdp": 5}}]},
     "key suite.readings[0].rows[0].where: buffer_bdp is no matrix key of plain; allowed: none (it has no matrix)"),
    ({"rows": [{"label": "r", "term": "retrans_per_megabyte(CC)"}]},
     "rows[0].term 'retrans_per_megabyte(CC)' (for core, bbr, CC = bbr): unknown function 'retrans_per_megabyte'"),
    ({"columns": [{"label": "only", "scenario": "core", "cc": "bbr"}]}, "key suite.readings.0.columns"),
])
def test_a_table_that_names_what_is_not_there_is_refused_naming_the_key(tmp_path, change, said):
    with pytest.raises(ScenarioError) as refused:
        experiments(tmp_path, table(**change))
    message = str(refused.value)
    assert "suites/paper-005.yaml" in message and said in message and "\n" not in message


def point(scenario: str, matrix: dict, repetition: int, short: float, per_mb: float, health: str = "pass"):
    return RunPoint(f"{scenario}-{repetition}-{len(matrix)}-{short}", scenario, ("paper-005",), matrix=matrix,
                    repetition=repetition, health=health, values=RunValues(short_rtt_flow_share=short),
                    ccs={"bbr": CcValues(cc="bbr", retransmits_per_mb=per_mb)})


def test_a_cell_is_judged_on_the_declared_healthy_runs_at_its_point(tmp_path):
    readings = Readings.model_validate(table())
    runs = [point("core", {"flows.*.cc": "bbr", "buffer_bdp": 5}, r, 0.1 * (r + 1), 2.0) for r in range(3)]
    runs += [point("core", {"flows.*.cc": "bbr", "buffer_bdp": 5}, 3, 0.9, 2.0),  # beyond the declared n
             point("core", {"flows.*.cc": "cubic", "buffer_bdp": 5}, 0, 0.9, 2.0),  # another point
             point("core", {"flows.*.cc": "bbr", "buffer_bdp": 1}, 0, 0.9, 4.0),  # another buffer
             point("other", {"buffer_bdp": 5}, 0, 0.4, 1.0), point("other", {"buffer_bdp": 5}, 1, 0.9, 9.0, "fail")]
    cells = measure(readings, runs, {"core": 3, "other": 3})
    share_core, share_other = cells[0]
    assert share_core.n == 3 and share_core.mean == pytest.approx(0.2)
    assert share_core.half_width == pytest.approx(4.303 * 0.1 / math.sqrt(3), rel=1e-3)
    assert share_other.n == 1 and share_other.mean == 0.4 and math.isnan(share_other.half_width)
    per_mb_core, per_mb_other = cells[1]
    assert per_mb_core.mean == pytest.approx(10 / 4) and per_mb_core.n == 4  # both buffers: the row names none
    assert per_mb_other.n == 1 and per_mb_other.mean == 1.0
    assert measure(readings, [], {"core": 3, "other": 3}) == [[None, None], [None, None]]


def test_a_cell_of_runs_of_two_builds_is_refused_naming_them():
    from cctest.analysis.claims import MixedRuns

    readings = Readings.model_validate(table())
    runs = [point("core", {"flows.*.cc": "bbr", "buffer_bdp": 5}, r, 0.2, 2.0) for r in range(2)]
    runs[1].module_builds = "bbr=abcdef123456"
    with pytest.raises(MixedRuns) as refused:
        measure(readings, runs, {"core": 3, "other": 3})
    assert "core, bbr" in str(refused.value) and "bbr=abcdef123456" in str(refused.value)


def test_the_page_shows_each_table_under_its_papers_claims():
    readings = Readings.model_validate(table())
    page = render([], 0, [], "cctest check x --markdown y", {"paper-005": "005: A paper"},
                  tables={"paper-005": [(readings, [[Cell(0.2, 0.25, 3), None], [Cell(2500.0, 120.0, 4), None]])]})
    lines = page.splitlines()
    start = lines.index("**Side by side**")
    assert lines[start + 2:start + 6] == [
        "| | core, bbr | other | the paper |", "|---|---|---|---|",
        "| share, 5 BDP | 0.2 ± 0.25 (3) | not run | 0.5 |",
        "| retransmissions per MB | 2,500 ± 120 (4) | not run | – |"]
