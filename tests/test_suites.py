"""The paper suites in experiments.yaml: one per seed paper, tagged paper-000 ... paper-004, each with
claims that cite the paper and can be judged on the runs the suite makes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.claims import parse
from cctest.cli import main
from cctest.plan import estimated_wall_s, expand
from cctest.scenario import load_experiments

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = load_experiments(REPO / "experiments.yaml")  # loading parses every claim and checks its ccs run
PAPERS = [f"00{k}" for k in range(5)]
# What the suites are sized for (README, "Paper suites"): the estimate `cctest list` shows for two VMs.
MAX_SUITE_VM_MINUTES = 40


def suite(paper: str) -> dict:
    return {name: s for name, s in EXPERIMENTS.scenarios.items() if f"paper-{paper}" in s.tags}


@pytest.mark.parametrize("paper", PAPERS)
def test_every_seed_paper_has_a_tagged_suite_whose_claims_cite_it(paper):
    scenarios = suite(paper)
    assert scenarios, f"no scenario tagged paper-{paper}"
    for name, scenario in scenarios.items():
        assert scenario.expect, f"{name}: a paper scenario without claims"
        assert scenario.description, f"{name}: say how it is scaled down from the paper"
        for entry in scenario.expect:
            assert entry.source.startswith(f"{paper} "), f"{name}: {entry.claim!r} cites {entry.source!r}"


@pytest.mark.parametrize("paper", PAPERS)
def test_every_claim_selects_runs_that_measure_what_it_names(paper):
    """A claim's `where` must select at least one run, and the selected runs must run every congestion
    control the claim names (in one point, or across points): otherwise it could only say "no data"."""
    for name in suite(paper):
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
    result = CliRunner().invoke(main, ["list", "--tag", f"paper-{paper}", "-f", str(REPO / "experiments.yaml")])
    assert result.exit_code == 0, result.output
    for name in suite(paper):
        assert name[:12] in result.output
    runs = [spec for name in suite(paper) for spec in expand(EXPERIMENTS, name)]
    vm_minutes = sum(estimated_wall_s(spec, vm=True) for spec in runs) / 2 / 60
    assert vm_minutes <= MAX_SUITE_VM_MINUTES, f"paper-{paper}: {vm_minutes:.0f} min in two VMs"


def test_an_unknown_tag_exits_2_naming_the_known_ones():
    result = CliRunner().invoke(main, ["list", "--tag", "paper-999", "-f", str(REPO / "experiments.yaml")])
    assert result.exit_code == 2
    assert "paper-000" in result.output and "paper-004" in result.output


def test_the_demo_stays_outside_the_suites():
    assert not EXPERIMENTS.get("demo").tags and not EXPERIMENTS.get("demo").expect
