"""The paper suites experiments.yaml includes, one file per seed paper (suites/paper-00N.yaml): its
scaled-down scenarios, tagged quick-00N, and those at the paper's own scale, tagged paper-00N (the
score), each with claims that cite the paper and can be judged on the runs the suite makes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cctest.analysis.claims import parse
from cctest.cli.main import main
from cctest.model.plan import estimated_wall_s, expand
from cctest.model.scenario import load_experiments
from tests import REPO

EXPERIMENTS = load_experiments(REPO / "experiments.yaml")  # loading parses every claim and checks its ccs run
PAPERS = [tag.removeprefix("paper-") for tag in EXPERIMENTS.suites]  # each suite file's header
# What the quick suites are sized for (docs/papers.md, "The suites"): the estimate `cctest list` shows for
# two VMs, per repetition (each quick scenario runs 3).
MAX_SUITE_VM_MINUTES_PER_REPETITION = 40
REPETITIONS = 3
# The protocol's least n for a scenario in the score (docs/papers.md, "Protocol").
MIN_PAPER_SCALE_REPETITIONS = 5


def suite(paper: str) -> dict:
    """The scaled-down suite of a paper (outside the score)."""
    return tagged(f"quick-{paper}")


def tagged(tag: str) -> dict:
    return {name: s for name, s in EXPERIMENTS.scenarios.items() if tag in s.tags}


def test_paper_scale_scenarios_fix_n_and_cite_their_paper():
    papers = {tag for s in EXPERIMENTS.scenarios.values() for tag in s.tags if tag.startswith("paper-")}
    assert papers, "no scenario at a paper's scale"
    for tag in sorted(papers):
        for name, scenario in tagged(tag).items():
            assert scenario.repetitions >= MIN_PAPER_SCALE_REPETITIONS, f"{name}: n = {scenario.repetitions}"
            assert scenario.expect and scenario.description, name
            for entry in scenario.expect:
                assert entry.source.startswith(f"{tag[-3:]} "), f"{name}: {entry.claim!r} cites {entry.source!r}"
                assert entry.paper.strip(), f"{name}: {entry.claim!r} has no paper: value"


def test_the_five_seed_papers_each_have_a_suite_file_with_a_title():
    assert PAPERS[:5] == ["000", "001", "002", "003", "004"]  # the seed papers, in the page's order
    for tag, suite in EXPERIMENTS.suites.items():
        assert suite.title.startswith(f"{tag.removeprefix('paper-')}: "), suite.title
        assert {EXPERIMENTS.file_of(name) for name in tagged(tag)} == {str(REPO / "suites" / f"{tag}.yaml")}


@pytest.mark.parametrize("paper", PAPERS)
def test_every_seed_paper_has_a_tagged_suite_whose_claims_cite_it(paper):
    scenarios = suite(paper)
    assert scenarios, f"no scenario tagged quick-{paper}"
    for name, scenario in scenarios.items():
        assert scenario.expect, f"{name}: a paper scenario without claims"
        assert scenario.description, f"{name}: say how it is scaled down from the paper"
        for entry in scenario.expect:
            assert entry.source.startswith(f"{paper} "), f"{name}: {entry.claim!r} cites {entry.source!r}"


@pytest.mark.parametrize("paper", PAPERS)
def test_every_claim_selects_runs_that_measure_what_it_names(paper):
    """A claim's `where` must select at least one run, and the selected runs must run every congestion
    control the claim names (in one point, or across points): otherwise it could only say "no data"."""
    for name in {**suite(paper), **tagged(f"paper-{paper}")}:
        specs = expand(EXPERIMENTS, name)
        for entry in EXPERIMENTS.get(name).expect:
            wanted = {k: v if isinstance(v, list) else [v] for k, v in entry.where.items()}
            selected = [s for s in specs if all(s.matrix.get(k) in values for k, values in wanted.items())]
            assert selected, f"{name}: {entry.claim!r} where {entry.where} selects no run"
            running = {flow.cc for s in selected for flow in s.flows}
            missing = parse(entry.claim).ccs - running
            assert not missing, f"{name}: {entry.claim!r} names {missing}, not run where {entry.where}"


@pytest.mark.parametrize("paper", PAPERS)
def test_cctest_list_shows_each_suite_and_it_fits_the_vm(paper):
    result = CliRunner().invoke(main, ["list", "--tag", f"quick-{paper}", "-f", str(REPO / "experiments.yaml")])
    assert result.exit_code == 0, result.output
    for name in suite(paper):
        assert name[:12] in result.output
    one_pass = [spec for name in suite(paper) for spec in expand(EXPERIMENTS, name, repetitions=1)]
    vm_minutes = sum(estimated_wall_s(spec, vm=True) for spec in one_pass) / 2 / 60
    assert vm_minutes <= MAX_SUITE_VM_MINUTES_PER_REPETITION, f"paper-{paper}: {vm_minutes:.0f} min in two VMs"


@pytest.mark.parametrize("paper", PAPERS)
def test_every_quick_scenario_runs_three_repetitions_and_states_the_papers_value(paper):
    """n >= 3 gives every claim a mean and an interval; docs/reproduction.md shows the paper's value
    beside ours."""
    for name, scenario in suite(paper).items():
        assert scenario.repetitions == REPETITIONS, f"{name}: repetitions {scenario.repetitions}"
        for entry in scenario.expect:
            assert entry.paper.strip(), f"{name}: {entry.claim!r} has no paper: value"


def test_every_paper_has_the_central_results_the_review_found_unclaimed():
    """001's delay and retransmission cuts (BBR and ACW in one
    matrix), 000's 1 BDP queue bound, 004's standing queue and a bbr_histmin scenario."""
    claims = {(name, e.claim) for name, s in EXPERIMENTS.scenarios.items() for e in s.expect}
    assert ("rtt-fairness", "qdelay(bbr_acw) <= 0.46 * qdelay(bbr)") in claims
    assert ("rtt-fairness", "retransmits(bbr_acw) <= 0.37 * retransmits(bbr)") in claims
    assert ("rtt-fairness", "retransmits(bbr_acw) <= 0.22 * retransmits(bbr)") in claims
    assert ("cws-alone", "max_queue_bdp <= 1") in claims
    assert ("bbr-standing-queue", "1 <= queue_bdp <= 1.5") in claims
    histmin = [s for s in suite("004").values() if any(f.cc == "bbr_histmin" for f in s.flows)
               or "bbr_histmin" in str(s.matrix)]
    assert histmin, "no paper-004 scenario runs bbr_histmin"
    # BBR-ACW both ways: the module default (per gain cycle) beside BBR, and per round
    assert EXPERIMENTS.get("rtt-fairness").matrix["flows.*.cc"] == ["bbr", "bbr_acw"]
    per_round = EXPERIMENTS.get("rtt-fairness-acw-per-round")
    assert {f.params.get("decide") for f in per_round.flows} == {2}


def test_a_wildcard_matrix_key_sets_every_flow():
    specs = expand(EXPERIMENTS, "rtt-fairness", repetitions=1)
    for spec in specs:
        assert len({flow.cc for flow in spec.flows}) == 1 and spec.flows[0].cc == spec.matrix["flows.*.cc"]
    assert len(specs) == 2 * 3 * 3  # cc x long RTT x buffer, no mixed pairs


def test_a_wildcard_and_an_indexed_key_for_the_same_field_are_refused():
    from cctest.model.scenario import ScenarioError, parse_experiments

    text = """
scenarios:
  s:
    link: {rate_mbps: 20, rtt_ms: 10, buffer_bdp: 1}
    flows: [{cc: bbr}, {cc: bbr}]
    duration_s: 10
    matrix: {flows.*.cc: [bbr, cubic], flows.1.cc: [bbr, cubic]}
"""
    with pytest.raises(ScenarioError, match=r"matrix\.flows\.1\.cc: sets what matrix\.flows\.\*\.cc sets"):
        expand(parse_experiments(text, "x.yaml"), "s")


def test_an_unknown_tag_exits_2_naming_the_known_ones():
    result = CliRunner().invoke(main, ["list", "--tag", "paper-999", "-f", str(REPO / "experiments.yaml")])
    assert result.exit_code == 2
    assert "paper-000" in result.output and "quick-004" in result.output


def test_the_demo_stays_outside_the_suites():
    assert not EXPERIMENTS.get("demo").tags and not EXPERIMENTS.get("demo").expect
