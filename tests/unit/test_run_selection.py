"""Choosing which runs an invocation makes: --first-repetition (extend a set already run), --only
(matrix points), --shard, and the guest of a --vm session getting exactly the host's choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.cli import main as cli
from cctest.cli.main import main
from cctest.emulation import engines, vm
from cctest.run import session

EXPERIMENTS = """
scenarios:
  s:
    link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic}, {cc: bbr}]
    duration_s: 10
    repetitions: 2
    seed: 7
    matrix:
      buffer_bdp: [0.5, 1, 5]
      flows.1.cc: [bbr, bbr_cws]
"""


@pytest.fixture
def experiments(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EXPERIMENTS)
    return path


def planned(experiments, *args) -> list[tuple]:
    result = CliRunner().invoke(main, ["run", "s", "-f", str(experiments), "--dry-run", "--json", *args])
    assert result.exit_code == 0, result.output
    return [(r["matrix"]["buffer_bdp"], r["matrix"]["flows.1.cc"], r["repetition"], r["seed"])
            for r in json.loads(result.stdout)]


def test_first_repetition_numbers_and_seeds_the_new_repetitions_after_the_old(experiments):
    first = planned(experiments, "-n", "3")
    more = planned(experiments, "-n", "3", "--first-repetition", "3")
    assert {(rep, seed) for *_, rep, seed in first} == {(0, 7), (1, 8), (2, 9)}
    assert {(rep, seed) for *_, rep, seed in more} == {(3, 10), (4, 11), (5, 12)}
    # the same points, none of the old (repetition, seed) pairs again
    assert {point[:2] for point in first} == {point[:2] for point in more}
    assert not {point[2:] for point in first} & {point[2:] for point in more}


def test_only_keeps_the_named_points(experiments):
    runs = planned(experiments, "--only", "buffer_bdp=5", "--only", "buffer_bdp=0.5", "--only", "flows.1.cc=bbr_cws")
    assert sorted({(b, cc) for b, cc, *_ in runs}) == [(0.5, "bbr_cws"), (5, "bbr_cws")]
    assert len(runs) == 4  # two repetitions each


@pytest.mark.parametrize("bad, says", [
    ("rtt_ms=20", "not a key of its matrix; allowed: buffer_bdp, flows.1.cc"),
    ("buffer_bdp=2", "not one of its values; allowed: 0.5, 1, 5"),
    ("buffer_bdp", "give KEY=VALUE"),
    ("buffer_bdp=[1, 2]", "one number or word"),
])
def test_a_bad_only_is_one_line_naming_the_file_key_and_allowed_values(experiments, bad, says):
    result = CliRunner().invoke(main, ["run", "s", "-f", str(experiments), "--only", bad, "--dry-run"])
    assert result.exit_code == 2 and says in result.output and result.output.count("\n") == 1, result.output


def test_a_vm_guest_makes_exactly_the_runs_the_host_selected(experiments, tmp_path, monkeypatch):
    """The guest reads its runs from the plan file the host wrote, never the experiments file: a
    shard of --only points of extra repetitions must reach it as the host chose them, in one VM or
    several."""
    seen = {}
    monkeypatch.setattr(cli, "_execute", lambda specs, opts: seen.update(specs=specs, opts=opts))
    args = ["run", "s", "-f", str(experiments), "--vm", "--engine", "qemu", "-n", "3", "--first-repetition", "3",
            "--only", "flows.1.cc=bbr_cws", "--shard", "2/2"]
    assert CliRunner().invoke(main, args).exit_code == 0
    specs = seen["specs"]
    host = [(s.label, s.repetition, s.seed) for s in specs]
    assert 0 < len(host) < 9 and all("bbrcws" in label for label, *_ in host)
    experiments.unlink()  # the guest has no use for it
    made = []
    monkeypatch.setattr(session, "run_native", lambda runs, opts, console: made.extend(runs) or [])
    for parts in ([list(range(len(host)))], [[0], list(range(1, len(host)))]):  # one VM, two VMs
        made.clear()
        for k, part in enumerate(parts):
            places = engines.QemuEngine(Path("/boot/vmlinuz-x"), vm.VMClock()).places(tmp_path, k)
            session.write_guest_plan(specs, part, seen["opts"], places)
            cmd = session.guest_command(places)
            result = CliRunner().invoke(main, cmd[cmd.index("guest-run"):])
            assert result.exit_code == 0, result.output
        assert made == specs
        assert [(s.label, s.repetition, s.seed) for s in made] == host
