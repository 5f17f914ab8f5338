"""The command line's habits: `show`, `--json` for scripts, doctor's exit code, did-you-mean for
typos, completion of scenario names and tags, and a --help that imports nothing heavy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cctest.cli.completion import complete_scenarios, complete_tags
from cctest.cli.main import main
from cctest.run import doctor
from tests import REPO

EXPERIMENTS = REPO / "experiments.yaml"
FIXTURES = REPO / "tests" / "fixtures" / "runs"

SWEEP = """
scenarios:
  sweep-one:
    description: one CUBIC flow over three buffers
    tags: [mine, buffers]
    link: {rate_mbps: 10, rtt_ms: 20, buffer_bdp: 1, aqm: fq_codel, ecn: true}
    flows: [{cc: cubic}, {cc: bbr}]
    duration_s: 10
    repetitions: 2
    matrix: {link.buffer_bdp: [0.5, 1, 2]}
    expect:
      - {claim: "share(bbr) < 0.6", source: "000 Fig. 13", note: "shorter run"}
  other:
    tags: [mine]
    link: {rate_mbps: 5, rtt_ms: 40, buffer_bdp: 2}
    flows: [{cc: reno}]
    duration_s: 5
"""


@pytest.fixture
def sweep_file(tmp_path) -> Path:
    path = tmp_path / "experiments.yaml"
    path.write_text(SWEEP)
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_show_gives_the_expanded_matrix_the_claims_and_the_estimate(sweep_file):
    result = invoke("show", "sweep-one", "-f", sweep_file)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "fq_codel + ECN" in out and "link.buffer_bdp: 0.5, 1, 2" in out
    assert "runs (6):" in out  # 3 buffers x 2 repetitions, each listed
    assert out.count(" r0\n") == 3 and out.count(" r1\n") == 3
    assert "share(bbr) < 0.6  [000 Fig. 13] — shorter run" in out
    assert "estimated wall time:" in out


def test_show_json_and_list_json_agree_and_carry_every_run(sweep_file):
    shown = json.loads(invoke("show", "sweep-one", "-f", sweep_file, "--json").output)
    listed = json.loads(invoke("list", "-f", sweep_file, "--json").output)
    assert [s["name"] for s in listed] == ["sweep-one", "other"]
    assert listed[0] == shown
    assert len(shown["runs"]) == 6 and {r["matrix"]["link.buffer_bdp"] for r in shown["runs"]} == {0.5, 1, 2}
    assert shown["claims"][0]["claim"] == "share(bbr) < 0.6"
    assert shown["link"]["aqm"] == "fq_codel" and shown["link"]["ecn"] is True
    assert shown["estimate_s"]["native"] > 6 * 10  # six 10 s runs, plus set-up


def test_list_in_a_pipe_cuts_no_cell(sweep_file):
    out = invoke("list", "-f", sweep_file).output  # CliRunner's stdout is no terminal
    assert "10 Mbit/s, 20 ms, 1 BDP, fq_codel + ECN" in out
    assert "link.buffer_bdp: 0.5, 1, 2" in out and "…" not in out


def test_show_an_unknown_scenario_suggests_the_closest(sweep_file):
    result = invoke("show", "swep-one", "-f", sweep_file)
    assert result.exit_code == 2
    assert "did you mean sweep-one?" in result.output


def test_a_mistyped_key_lists_the_allowed_keys_and_the_closest(sweep_file):
    sweep_file.write_text(SWEEP.replace("buffer_bdp: 1,", "bufer_bdp: 1,"))
    result = invoke("list", "-f", sweep_file)
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line
    assert "key link.bufer_bdp: unknown key; did you mean buffer_bdp?" in line
    assert "allowed: rate_mbps, rtt_ms, buffer_bdp, buffer_bytes" in line
    sweep_file.write_text(SWEEP.replace("duration_s: 10", "duraton_s: 10"))
    assert "did you mean duration_s?" in invoke("list", "-f", sweep_file).output
    sweep_file.write_text(SWEEP.replace("{cc: reno}", "{cc: reno, strat_s: 1}"))
    assert "flows.0.strat_s: unknown key; did you mean start_s?" in invoke("list", "-f", sweep_file).output


def test_dry_run_json_lists_every_run_with_its_link_and_flows(sweep_file):
    result = invoke("run", "sweep-one", "-f", sweep_file, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)
    assert len(runs) == 6
    assert sorted({r["link"]["buffer_bdp"] for r in runs}) == [0.5, 1, 2]
    assert [f["cc"] for f in runs[0]["flows"]] == ["cubic", "bbr"]
    assert runs[0]["link"]["aqm"] == "fq_codel" and runs[0]["vm_clock"]["kind"] == "virtual"
    assert "tc qdisc" in runs[0]["plan"]
    shard = json.loads(invoke("run", "sweep-one", "-f", sweep_file, "--dry-run", "--json", "--shard", "1/2").output)
    assert 0 < len(shard) < 6
    assert invoke("run", "sweep-one", "-f", sweep_file, "--json").exit_code == 2  # --json only with --dry-run


def _checks(vm_ok: bool, native_ok: bool) -> list:
    return [doctor.Check("iperf3", native_ok, "x", "apt-get install iperf3", "native"),
            doctor.Check("vng", vm_ok, "x", "pip install virtme-ng", "vm")]


@pytest.mark.parametrize("vm_ok, native_ok, mode, code", [(False, False, "none", 1), (True, False, "vm", 0),
                                                          (False, True, "native", 0)])
def test_doctor_exits_1_when_no_mode_can_run_and_says_so_in_json(monkeypatch, vm_ok, native_ok, mode, code):
    monkeypatch.setattr(doctor, "checks", lambda: _checks(vm_ok, native_ok))
    result = invoke("doctor", "--json")
    assert result.exit_code == code, result.output
    report = json.loads(result.output)
    assert report["mode"] == mode and report["verdict"].startswith(mode)
    assert {c["name"]: c["ok"] for c in report["checks"]} == {"iperf3": native_ok, "vng": vm_ok}
    text = invoke("doctor")
    assert text.exit_code == code and f"mode: {mode}" in text.output


def test_check_json_prints_the_verdicts_it_writes(tmp_path):
    run = tmp_path / "runs" / "demo"
    shutil.copytree(FIXTURES / "demo-cubic-bbr-20261122-232527-base-r0", run)
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    resolved["expect"] = [{"claim": "share(cubic) > 0.01"}]
    (run / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    out = tmp_path / "c.json"
    result = CliRunner().invoke(main, ["check", str(tmp_path / "runs"), "-o", str(out), "--json", "--no-fail",
                                       "--recorded-claims"])
    printed = json.loads(result.stdout)
    assert printed == json.loads(out.read_text())
    assert printed["claims"][0]["claim"] == "share(cubic) > 0.01"


class _Ctx:
    def __init__(self, path):
        self.params = {"experiments_file": str(path)}


def test_completion_offers_the_suite_files_scenarios_and_tags(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "paper-005.yaml").write_text("suite: {tag: paper-005, title: A}\n"
                                                         "scenarios: {five: {tags: [paper-005]}}\n")
    (tmp_path / "outside.yaml").write_text("scenarios: {far: {tags: [far]}}\n")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "suites").symlink_to(tmp_path / "suites")
    (tmp_path / "lab" / "exp.yaml").write_text("scenarios: {one: {}}\n"
                                               "include: [suites/paper-005.yaml, ../outside.yaml]\n")
    ctx = _Ctx(tmp_path / "lab" / "exp.yaml")
    assert complete_scenarios(ctx, None, "") == ["one"]  # the suite lies outside the folder, through a link
    (tmp_path / "lab" / "suites").unlink()
    (tmp_path / "suites").rename(tmp_path / "lab" / "suites")
    assert complete_scenarios(ctx, None, "") == ["one", "five"] and complete_tags(ctx, None, "p") == ["paper-005"]


def test_completion_offers_scenario_names_and_tags(sweep_file, tmp_path):
    assert complete_scenarios(_Ctx(sweep_file), None, "sw") == ["sweep-one"]
    assert complete_scenarios(_Ctx(sweep_file), None, "") == ["sweep-one", "other"]
    assert complete_tags(_Ctx(sweep_file), None, "") == ["mine", "buffers"]
    assert complete_scenarios(_Ctx(tmp_path / "missing.yaml"), None, "") == []  # nothing, no error
    env = {**os.environ, "_CCTEST_COMPLETE": "bash_complete", "COMP_WORDS": f"cctest show -f {sweep_file} sw",
           "COMP_CWORD": "4"}
    cctest = str(Path(sys.executable).with_name("cctest"))
    done = subprocess.run([cctest], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert "sweep-one" in done.stdout, done.stderr


def test_help_imports_nothing_heavy():
    code = ("import sys, cctest.cli.main; heavy = [m for m in ('pandas', 'numpy', 'plotly', 'pydantic', 'rich') "
            "if m in sys.modules]; print(heavy); sys.exit(bool(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_outside_a_checkout_a_missing_experiments_file_names_the_f_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("list")
    assert result.exit_code == 2
    assert "experiments.yaml: cannot read" in result.output and "with -f FILE" in result.output


def test_the_cli_console_carries_a_live_progress_bar():
    """A native run on a terminal shows a live bar (runner._progress): rich enters the console as a
    context manager, which the CLI's lazily made console must support like rich's own."""
    from rich.progress import Progress

    from cctest.cli import main as cli

    with Progress(console=cli.console, disable=False) as progress:
        task = progress.add_task("build topology", total=None)
        progress.update(task, description="flows")
    assert progress.tasks[0].description == "flows"


def test_a_full_disk_during_runs_is_one_line_and_exit_1(capsys):
    """A campaign's captures can fill the disk: that is the host's state, not a bug, so no traceback."""
    import errno

    from cctest.cli.main import _run_and_list

    def full() -> list[Path]:
        raise OSError(errno.ENOSPC, "No space left on device", "/out/scn/run/raw/tracefs.log")

    with pytest.raises(SystemExit) as exit_:
        _run_and_list(full)
    assert exit_.value.code == 1
    said = capsys.readouterr().err.strip()
    assert "\n" not in said
    assert said.startswith("no space left on device writing /out/scn/run/raw/tracefs.log: torn down;")
    assert "--first-repetition" in said and "Traceback" not in said

    def other() -> list[Path]:
        raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):  # anything else is a bug: it keeps its traceback
        _run_and_list(other)
