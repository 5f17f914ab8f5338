"""`cctest run --resume`: which planned runs --out holds made as this session would make them, read
from run directories' meta.json and scenario.yaml (written here as a run writes them)."""

from __future__ import annotations

import json

import pytest

from cctest.base.errors import BadInput
from cctest.host import rundir
from cctest.model.plan import expand
from cctest.model.scenario import parse_experiments
from cctest.run import resume

EXPERIMENTS = """\
scenarios:
  sweep:
    link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic}, {cc: bbr}]
    duration_s: 10
    repetitions: 2
    matrix:
      buffer_bdp: [0.5, 5]
"""
COMMIT = "a" * 40
UML = {"name": "uml", "kernel": {"source": "linux-source-6.1 6.1.192-3", "inputs_sha256": "f5c126e4718a"},
       "time_travel": "inf-cpu"}


@pytest.fixture
def specs(monkeypatch):
    monkeypatch.setattr(rundir, "git_commit", lambda: COMMIT)
    return expand(parse_experiments(EXPERIMENTS, "exp.yaml"), "sweep")


def made(out, spec, name=None, **changes):
    """A run directory of `spec` under out/<scenario>/ as a finished run leaves it, with `changes`
    to its meta.json."""
    run_dir = out / spec.scenario.name / (name or f"20261130-000000-{spec.label}-r{spec.repetition}")
    run_dir.mkdir(parents=True)
    (run_dir / "scenario.yaml").write_text(rundir.scenario_text(spec))
    meta = {"scenario": spec.scenario.name, "matrix": spec.matrix, "repetition": spec.repetition, "seed": spec.seed,
            "status": "ok", "cctest": {"version": "0.1.0", "git_commit": COMMIT},
            "engine": {**UML, "host_cpu": 1, "rng_seed": spec.seed}, **changes}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    return run_dir


def test_runs_made_by_this_commit_on_this_engine_are_skipped_and_the_rest_remain(specs, tmp_path):
    assert len(specs) == 4
    kept = made(tmp_path, specs[0]), made(tmp_path, specs[3])
    found = resume.find_made(specs, tmp_path, UML)
    assert found.dirs == {0: kept[0], 3: kept[1]}
    assert found.remaining(specs) == [specs[1], specs[2]]
    assert found.not_ingested() == list(kept)  # no checks.json: the session that made them ended first
    (kept[0] / "checks.json").write_text("{}")
    assert found.not_ingested() == [kept[1]]


@pytest.mark.parametrize("changes", [
    {"status": "failed"}, {"status": "interrupted"}, {"status": "running"},
    {"seed": 999}, {"repetition": 1}, {"matrix": {"buffer_bdp": 5}},
    {"cctest": {"git_commit": "b" * 40}}, {"cctest": {"git_commit": COMMIT + "-dirty"}},
    {"engine": {**UML, "kernel": {**UML["kernel"], "inputs_sha256": "0123456789ab"}}},
    {"engine": {"name": "qemu"}},
], ids=lambda c: next(iter(c)) + "=" + json.dumps(next(iter(c.values())))[:20])
def test_a_run_made_otherwise_runs_again(specs, tmp_path, changes):
    made(tmp_path, specs[0], **changes)
    assert resume.find_made(specs, tmp_path, UML).dirs == {}


def test_a_scenario_edited_since_the_run_runs_again(specs, tmp_path):
    run_dir = made(tmp_path, specs[0])
    (run_dir / "scenario.yaml").write_text(rundir.scenario_text(specs[0]).replace("duration_s: 10", "duration_s: 20"))
    assert resume.find_made(specs, tmp_path, UML).dirs == {}


def test_one_run_directory_stands_for_one_planned_run_only(specs, tmp_path):
    """A run planned twice (a scenario named twice on the command line) is made by two directories."""
    twice = [specs[0], specs[0]]
    first = made(tmp_path, specs[0])
    assert resume.find_made(twice, tmp_path, UML).dirs == {0: first}
    second = made(tmp_path, specs[0], name="20261130-000001-again")
    assert resume.find_made(twice, tmp_path, UML).dirs == {0: first, 1: second}


def test_a_native_run_must_have_run_on_this_kernel(specs, tmp_path):
    made(tmp_path, specs[0], engine={"name": "native"}, kernel={"release": "6.1.0-28-amd64"})
    assert resume.find_made(specs, tmp_path, {"name": "native"}, "6.1.0-28-amd64").dirs.keys() == {0}
    assert resume.find_made(specs, tmp_path, {"name": "native"}, "6.18.0").dirs == {}


def test_unreadable_directories_are_not_runs_to_keep(specs, tmp_path):
    run_dir = made(tmp_path, specs[0])
    (run_dir / "meta.json").write_text("{not json")
    (tmp_path / "sweep" / "stray-file").write_text("")
    assert resume.find_made(specs, tmp_path, UML).dirs == {}


def test_a_meta_json_that_links_out_of_its_run_directory_is_not_read(specs, tmp_path):
    run_dir = made(tmp_path, specs[0])
    elsewhere = tmp_path / "elsewhere.json"
    (run_dir / "meta.json").rename(elsewhere)
    (run_dir / "meta.json").symlink_to(elsewhere)
    assert resume.find_made(specs, tmp_path, UML).dirs == {}


def test_a_checkout_with_uncommitted_changes_cannot_resume(specs, tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "git_commit", lambda: COMMIT + "-dirty")
    with pytest.raises(BadInput, match=r"--resume: this checkout's commit is a+-dirty: resume needs a clean checkout"):
        resume.find_made(specs, tmp_path, UML)


def test_resume_with_dry_run_is_refused_in_one_line(tmp_path):
    from click.testing import CliRunner

    from cctest.cli.main import main

    (tmp_path / "exp.yaml").write_text(EXPERIMENTS)
    result = CliRunner().invoke(main, ["run", "sweep", "-f", str(tmp_path / "exp.yaml"), "--resume", "--dry-run",
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("error: --resume is decided as the runs start")
    assert not (tmp_path / "out").exists()
