"""A --vm guest's plan file (cctest/model/guestplan.py): the runs the host chose for the guest, read
back by the hidden `cctest guest-run` as the same RunSpecs without the experiments file; a plan
this code cannot read is refused in one line, exit 2, before anything is written."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cctest.cli import main as cli
from cctest.cli.main import main
from cctest.emulation import engines, umlkernel, vm
from cctest.host import rundir
from cctest.model import guestplan
from cctest.model.plan import expand
from cctest.model.scenario import load_experiments, parse_experiments
from cctest.run import session
from tests import REPO

EXPERIMENTS = REPO / "experiments.yaml"
GUEST_OUT, GUEST_MANIFEST = "/run/share/out", "/run/share/home/manifest.txt"
FACTS = guestplan.HostFacts(commit="0" * 40, tools={"iperf3": "iperf 3.12 (cJSON 1.7.15)", "ping": "missing"})


def host_selection(monkeypatch, *args: str) -> tuple[list, session.RunOptions]:
    """The runs and options `cctest run ARGS --vm` hands the session, nothing booted."""
    seen = {}
    monkeypatch.setattr(cli, "_execute", lambda specs, opts: seen.update(specs=specs, opts=opts))
    result = CliRunner().invoke(main, ["run", *args, "-f", str(EXPERIMENTS), "--vm", "--engine", "qemu"])
    assert result.exit_code == 0, result.output
    return seen["specs"], seen["opts"]


@pytest.mark.parametrize("args", [
    ["buffer-sweep-1v1"],  # a two-key matrix, ints and floats among one key's values
    ["rtt-fairness", "-n", "1"],  # flows.*.cc, a per-flow RTT
    ["demo", "-n", "3", "--first-repetition", "5"],  # repetitions numbered and seeded from 5
    ["loss-sweep", "--shard", "2/3"],
    ["cubic-bbr-buffer-sweep", "--only", "buffer_bdp=5", "--only", "flows.1.cc=bbr_shallow"],
    ["aqm-step", "acw-l50-per-ack"],  # AQMs with their parameters, a rate schedule, module parameters
], ids=lambda args: " ".join(args))
def test_a_plan_file_reads_back_as_the_runs_the_host_chose(args, monkeypatch, tmp_path):
    specs, opts = host_selection(monkeypatch, *args)
    path = tmp_path / "plan.json"
    guestplan.write(path, specs, names=opts.names, out=GUEST_OUT, manifest=GUEST_MANIFEST, facts=FACTS)
    plan = guestplan.read(path)
    assert plan.runs == specs
    assert [(r.scenario.name, r.label, r.repetition, r.seed) for r in plan.runs] == [
        (s.scenario.name, s.label, s.repetition, s.seed) for s in specs]
    # the scenario comes back with the keys it was given: its resolved mapping and record alike
    assert [r.scenario.model_fields_set for r in plan.runs] == [s.scenario.model_fields_set for s in specs]
    assert (plan.names, plan.out, plan.manifest) == (opts.names, GUEST_OUT, GUEST_MANIFEST)


def test_every_run_of_experiments_yaml_survives_a_plan_file():
    experiments = load_experiments(EXPERIMENTS)
    guestplan.check_carried([spec for name in experiments.scenarios for spec in expand(experiments, name)])


HELD_TWICE = """
defaults:
  link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
  duration_s: 10
scenarios:
  s:
    flows: [{cc: cubic}]
    matrix:
      flows.0: [{cc: cubic}, {cc: bbr, count: 2}]
"""


def test_scenario_yaml_reads_the_same_from_a_plan_file_when_the_scenario_holds_a_value_twice(tmp_path):
    """A matrix point that sets a mapping puts one object in the flows and in matrix_point; JSON keeps
    two copies. scenario.yaml writes both in full, never as a YAML alias, whichever the run came from."""
    specs = expand(parse_experiments(HELD_TWICE, "e.yaml"), "s")
    path = tmp_path / "plan.json"
    guestplan.write(path, specs, names=["s"], out=GUEST_OUT, manifest=GUEST_MANIFEST, facts=FACTS)
    for spec, read_back in zip(specs, guestplan.read(path).runs, strict=True):
        text = rundir.scenario_text(spec)
        assert rundir.scenario_text(read_back) == text and "&id" not in text
        assert yaml.safe_load(text) == spec.resolved


@pytest.mark.parametrize("experiments_file", ["experiments.yaml", "tests/vm/scenarios.yaml", "peer/cao2019.yaml"])
def test_scenario_yaml_of_every_run_in_the_repository_is_the_text_it_was(experiments_file):
    experiments = load_experiments(REPO / experiments_file)
    for name in experiments.scenarios:
        for spec in expand(experiments, name, repetitions=1):  # each matrix point once: repetitions differ in a number
            assert rundir.scenario_text(spec) == yaml.safe_dump(spec.resolved, sort_keys=False), name


def test_a_value_json_cannot_carry_is_refused_before_any_guest_boots():
    experiments = load_experiments(EXPERIMENTS)
    spec = expand(experiments, "demo")[0]
    dated = dataclasses.replace(spec, resolved={**spec.resolved, "description": datetime.date(2026, 11, 29)})
    with pytest.raises(guestplan.PlanError, match=r"^scenario demo: run base r0 does not survive a guest's plan"):
        guestplan.check_carried([spec, dated])


def test_guest_run_makes_exactly_the_plans_runs_natively_without_ingest(monkeypatch, tmp_path):
    specs, opts = host_selection(monkeypatch, "cws-alone", "--only", "buffer_bdp=5")
    path = tmp_path / "plan.json"
    guestplan.write(path, specs, names=opts.names, out=GUEST_OUT, manifest=GUEST_MANIFEST, facts=FACTS)
    seen = {}
    monkeypatch.setattr(rundir, "_handed", None)  # put back after the test: guest-run sets it
    monkeypatch.setattr(session, "run_native", lambda runs, opts, console: seen.update(
        runs=runs, opts=opts, facts=(rundir.git_commit(), rundir.tool_versions())) or [])
    result = CliRunner().invoke(main, ["guest-run", str(path)])
    assert result.exit_code == 0, result.output
    assert seen["runs"] == specs
    # the runs record the host's commit and tools as its plan hands them, without asking for them
    assert seen["facts"] == (FACTS.commit, FACTS.tools)
    given = seen["opts"]
    assert (given.in_vm, given.ingest, given.mode) == (True, False, "native")
    assert (given.out, given.manifest, given.names, given.source) == (
        Path(GUEST_OUT), Path(GUEST_MANIFEST), ["cws-alone"], path)


def test_guest_run_is_not_a_command_users_are_shown():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "guest-run" not in result.output
    run_help = CliRunner().invoke(main, ["run", "--help"]).output
    assert not any(flag in run_help for flag in ("--in-vm", "--only-runs", "--manifest", "--no-ingest"))


def _good(tmp_path) -> bytes:
    specs = expand(load_experiments(EXPERIMENTS), "aqm-step")[:2]
    path = tmp_path / "good.json"
    guestplan.write(path, specs, names=["aqm-step"], out=str(tmp_path / "out"), manifest=str(tmp_path / "m.txt"),
                    facts=FACTS)
    data = path.read_bytes()
    path.unlink()
    return data


def _edited(edit):
    def make(good: bytes) -> bytes:
        plan = json.loads(good)
        edit(plan)
        return json.dumps(plan).encode()
    return make


BAD_PLANS = {
    "an experiments file": (lambda good: EXPERIMENTS.read_bytes(), "not JSON"),
    "cut short": (lambda good: good[: len(good) // 2], "not JSON"),
    "empty": (lambda good: b"", "not JSON"),
    "a list": (lambda good: b"[]", "not a JSON object; a plan is one"),
    "a run's meta.json": (lambda good: json.dumps({"schema_version": 3, "run_id": "x"}).encode(),
                          "plan_version None, which this cctest does not read (it reads 2)"),
    "a newer plan": (_edited(lambda p: p.update(plan_version=3)), "plan_version 3, which this cctest does not"),
    "an unknown key": (_edited(lambda p: p.update(only_runs=[0])), "(only_runs: not a field of a plan)"),
    "an unknown key in a link": (_edited(lambda p: p["runs"][1]["link"].update(rate_bps=1)),
                                 "(runs.1.link.rate_bps: not a field of a plan)"),
    "no runs": (_edited(lambda p: p.pop("runs")), "(runs: missing)"),
    "an empty list of runs": (_edited(lambda p: p.update(runs=[])), "(runs: none; a plan holds the runs its guest"),
    "a relative out": (_edited(lambda p: p.update(out="out")), "(out 'out' is not an absolute path"),
    "a run without its seed": (_edited(lambda p: p["runs"][0].pop("seed")), "(runs.0.seed: missing)"),
    "a wrong type": (_edited(lambda p: p["runs"][0].update(repetition="first")), "runs.0.repetition must be"),
    "a link not its scenario's": (_edited(lambda p: p["runs"][1]["link"].update(rate_mbps=1000.0)),
                                  "(runs.1.link: not the link its scenario makes)"),
    "a seed not its scenario's": (_edited(lambda p: p["runs"][0].update(seed=12345)),
                                  "(runs.0.seed: not its scenario's seed plus its repetition)"),
    "an unknown congestion control": (_edited(lambda p: p["runs"][0]["scenario"]["flows"][0].update(cc="warp")),
                                      "runs.0.scenario.flows.0.cc unknown congestion control 'warp'"),
}


@pytest.mark.parametrize("name", BAD_PLANS)
def test_a_bad_plan_is_refused_in_one_line_and_nothing_is_written(name, tmp_path, monkeypatch):
    make, says = BAD_PLANS[name]
    path = tmp_path / "plan.json"
    path.write_bytes(make(_good(tmp_path)))
    monkeypatch.setattr(session, "run_native", lambda *args: pytest.fail("a bad plan reached the runs"))
    before = sorted(tmp_path.rglob("*"))
    result = CliRunner().invoke(main, ["guest-run", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and result.output.startswith(f"error: {path}: "), result.output
    assert says in result.output, result.output
    assert sorted(tmp_path.rglob("*")) == before  # its out and manifest never made


@pytest.mark.parametrize("kind", ["missing", "a directory"])
def test_a_plan_file_that_is_no_file_is_refused_in_one_line(kind, tmp_path):
    path = tmp_path / "plan.json"
    if kind == "a directory":
        path.mkdir()
    result = CliRunner().invoke(main, ["guest-run", str(path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and result.output.startswith(f"error: {path}: ")


def test_the_guest_command_names_its_plan_file_and_nothing_else(tmp_path):
    places = engines.QemuEngine(Path("/boot/vmlinuz-x"), vm.VMClock()).places(tmp_path, 3)
    assert session.guest_command(places) == [sys.executable, "-m", "cctest", "guest-run", places.plan]
    assert places.host_plan == Path(places.plan) and places.host_plan.parent == tmp_path  # the share holds it


def test_a_uml_guests_plan_lies_in_its_home_and_names_no_host_path(tmp_path):
    build = umlkernel.KernelBuild(tmp_path / "k", "6.1.192-2", "a" * 64, "6.1.192")
    places = engines.UmlEngine(build).places(tmp_path / "out", 0)
    assert places.plan == "/run/share/home/plan.json" and places.host_plan == tmp_path / "out" / ".uml-0" / "plan.json"
    assert session.guest_command(places)[-2:] == ["guest-run", "/run/share/home/plan.json"]
    specs = expand(load_experiments(EXPERIMENTS), "demo")
    opts = session.RunOptions(source=EXPERIMENTS, names=["demo"], out=tmp_path / "out", mode="vm", kernel=None,
                              kvm=False)
    session.write_guest_plan(specs, [0], opts, places)
    text = places.host_plan.read_text()
    assert str(tmp_path) not in text and str(REPO) not in text
    assert guestplan.read(places.host_plan).runs == specs[:1]
    places.release()
    assert not places.host_plan.exists()


def test_a_qemu_guests_plan_is_gone_once_the_host_has_read_its_manifest(tmp_path):
    places = engines.QemuEngine(Path("/boot/vmlinuz-x"), vm.VMClock()).places(tmp_path, 0)
    specs = expand(load_experiments(EXPERIMENTS), "demo")
    opts = session.RunOptions(source=EXPERIMENTS, names=["demo"], out=tmp_path, mode="vm", kernel=None, kvm=False)
    session.write_guest_plan(specs, [0], opts, places)
    assert guestplan.read(places.host_plan).manifest == places.manifest
    places.release()
    assert not places.host_plan.exists() and not places.host_manifest.exists()
