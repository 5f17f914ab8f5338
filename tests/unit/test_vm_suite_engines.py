"""Which engine each VM-suite job runs on (tests/vm/harness.py): UML by default, a small QEMU
cross-check, CCTEST_ENGINE to choose; a misspelt job name would silently move a test's job."""

from __future__ import annotations

import pytest
import yaml

from tests.vm import harness
from tests.vm.harness import GUEST, QEMU_CROSS_CHECK, QEMU_ONLY, engine_of_job

SCENARIOS = yaml.safe_load((GUEST.parent / "scenarios.yaml").read_text())["scenarios"]


def test_every_job_kept_on_qemu_is_a_job_of_the_suite():
    vm_tests = "".join(path.read_text() for path in GUEST.parent.glob("test_*.py"))
    for job in {**QEMU_ONLY, **QEMU_CROSS_CHECK}:
        if ":" in job:  # a special job of guest.py, named as its test marks it
            assert f'"{job}"' in vm_tests, job
        else:
            assert job in SCENARIOS, job
    assert QEMU_ONLY.keys().isdisjoint(QEMU_CROSS_CHECK)
    assert all(reason.strip() for reason in {**QEMU_ONLY, **QEMU_CROSS_CHECK}.values())


@pytest.mark.parametrize("job", ["variants-vs-cubic", "kill9all:interrupt-me", "kparams:bbr3", *QEMU_CROSS_CHECK,
                                 *QEMU_ONLY])
def test_make_test_runs_the_cross_check_on_qemu_and_the_rest_on_uml(job):
    expected = "qemu" if job in QEMU_CROSS_CHECK or job in QEMU_ONLY else "uml"
    assert engine_of_job(job, None) == expected
    assert engine_of_job(job, "qemu") == "qemu"  # the suite as it was
    assert engine_of_job(job, "uml") == ("qemu" if job in QEMU_ONLY else "uml")


def test_the_qemu_cross_check_is_small():
    from cctest.model.plan import expand
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(str(GUEST.parent / "scenarios.yaml"))
    seconds = {name: sum(s.scenario.duration_s for s in expand(experiments, name)) for name in SCENARIOS}
    on_qemu = sum(seconds[job] for job in QEMU_CROSS_CHECK if job in seconds)
    assert on_qemu <= 0.15 * sum(seconds.values()), (on_qemu, sum(seconds.values()))


def test_an_unknown_engine_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("CCTEST_ENGINE", "kvm")
    with pytest.raises(pytest.UsageError, match="CCTEST_ENGINE=kvm: allowed values are qemu, uml"):
        harness.engine_choice()
    monkeypatch.setenv("CCTEST_ENGINE", "")
    assert harness.engine_choice() is None


def test_each_vm_gets_its_share_of_the_runs_in_a_plan_file_and_every_run_once(tmp_path):
    """guest.py hands its VM's plan file to `cctest guest-run`, as a session's guest runs it: the
    shares together are every plain job's runs, each once, and each plan reads back as its share."""
    from cctest.emulation import engines, vm
    from cctest.model import guestplan
    from cctest.model.plan import expand
    from cctest.model.scenario import load_experiments

    plain = ["cubic-fills-the-link", "cubic-bbr-shallow", "delay-deep"]
    shares = harness.vm_shares([*plain, "interrupt:interrupt-me", "kill9:interrupt-me"], 3)
    experiments = load_experiments(str(GUEST.parent / "scenarios.yaml"))
    every = [spec for name in plain for spec in expand(experiments, name)]
    shared = [run for runs, _, _ in shares for run in runs]
    assert len(shared) == len(every) and all(shared.count(spec) == 1 for spec in every)
    assert sorted(job for _, _, specials in shares for job in specials) == ["interrupt:interrupt-me",
                                                                           "kill9:interrupt-me"]
    for k, (runs, names, _) in enumerate(shares):
        places = engines.QemuEngine(tmp_path / "vmlinuz", vm.VMClock()).places(tmp_path, k)
        args = harness.plan_args(runs, names, places)
        if not runs:
            assert args == []
            continue
        assert args == ["--plan", places.plan, *plain]
        plan = guestplan.read(places.host_plan)
        assert plan.runs == runs and plan.manifest == f"{places.out}/runs.manifest"


def test_a_special_jobs_plan_holds_every_run_of_its_scenario(tmp_path):
    from cctest.model import guestplan
    from cctest.model.plan import expand
    from cctest.model.scenario import load_experiments
    from tests.vm import guest

    path = guest.plan_of("interrupt-me", tmp_path / "out", tmp_path / "kill9_interrupt-me.manifest")
    plan = guestplan.read(path)
    assert plan.runs == expand(load_experiments(str(GUEST.parent / "scenarios.yaml")), "interrupt-me")
    assert (plan.out, plan.manifest) == (str(tmp_path / "out"), str(tmp_path / "kill9_interrupt-me.manifest"))
