"""This host's sessions against the cost model: logged by each --vm session, read back to scale the
estimates of `list`, `show`, `run --dry-run --json` and the session's own cost line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cctest.cli.main import main
from cctest.emulation import hostcost
from cctest.model.plan import estimated_wall_s, expand
from cctest.model.scenario import parse_experiments
from cctest.run.session import cost_line

SCENARIO = """
scenarios:
  c:
    link: {rate_mbps: 80, rtt_ms: 25, buffer_bdp: 1}
    flows: [{cc: cubic, count: 2}, {cc: bbr, count: 2}]
    duration_s: 300
    repetitions: 4
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CCTEST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_host_without_sessions_keeps_the_model(cache):
    assert hostcost.host_factor("uml") is None


def test_the_factor_is_the_median_of_this_hosts_last_sessions_on_the_engine(cache):
    for wall, estimate in [(100, 100), (300, 100), (250, 100), (200, 100), (210, 100), (240, 100)]:
        hostcost.remember("uml", wall, estimate, guest_s=600, slots=2)
    hostcost.remember("qemu", 900, 100, guest_s=600, slots=2)
    factor = hostcost.host_factor("uml")
    # the last five uml sessions (the first, at 1.0, has aged out): 3.0, 2.5, 2.0, 2.1, 2.4
    assert factor == hostcost.HostFactor(2.4, 5)
    assert hostcost.host_factor("qemu") == hostcost.HostFactor(9.0, 1)


def test_another_hosts_sessions_short_sessions_and_foreign_lines_do_not_count(cache):
    hostcost.remember("uml", 50, 10, guest_s=20, slots=1)  # a demo: mostly boot, not logged
    assert not hostcost.log_path().exists()
    hostcost.log_path().parent.mkdir(parents=True)
    other = {"engine": "uml", "host": "another CPU x64", "wall_s": 10, "estimated_s": 100}
    hostcost.log_path().write_text(json.dumps(other) + "\nnot json\n[1, 2]\n"
                                   + json.dumps({"engine": "uml", "host": hostcost.host_key()}) + "\n"
                                   + json.dumps({"engine": "uml", "host": hostcost.host_key(),
                                                 "wall_s": 5, "estimated_s": 0}) + "\n")
    assert hostcost.host_factor("uml") is None
    hostcost.remember("uml", 180, 100, guest_s=600, slots=2)
    assert hostcost.host_factor("uml") == hostcost.HostFactor(1.8, 1)


def test_another_uml_series_or_mode_is_logged_and_read_as_an_engine_of_its_own(cache, monkeypatch):
    monkeypatch.delenv("CCTEST_UML_SERIES", raising=False)
    monkeypatch.delenv("CCTEST_UML_USERSPACE", raising=False)
    hostcost.remember("uml", 200, 100, guest_s=600, slots=1)  # 6.1, the default: "uml" as before
    monkeypatch.setenv("CCTEST_UML_SERIES", "7.2")
    assert hostcost.host_factor("uml") is None
    hostcost.remember("uml", 100, 100, guest_s=600, slots=1)  # seccomp, 7.2's default
    monkeypatch.setenv("CCTEST_UML_USERSPACE", "ptrace")
    hostcost.remember("uml", 300, 100, guest_s=600, slots=1)
    assert hostcost.host_factor("uml") == hostcost.HostFactor(3.0, 1)
    logged = [json.loads(line)["engine"] for line in hostcost.log_path().read_text().splitlines()]
    assert logged == ["uml", "uml-7.2-seccomp", "uml-7.2-ptrace"]
    monkeypatch.delenv("CCTEST_UML_SERIES")
    monkeypatch.delenv("CCTEST_UML_USERSPACE")
    assert hostcost.host_factor("uml") == hostcost.HostFactor(2.0, 1)
    assert hostcost.log_key("qemu", {"CCTEST_UML_SERIES": "7.2"}) == "qemu"
    assert hostcost.log_key("uml", {"CCTEST_UML_SERIES": "9.9"}) == "uml"  # no session could boot it


def test_a_session_that_ran_beside_other_work_does_not_scale_the_estimates(cache):
    """Its guests had half their CPUs: its wall time measured the other work too."""
    hostcost.remember("uml", 400, 100, guest_s=600, slots=2, cpu_s=400)  # 400 of 800 CPU s: 50 %
    assert json.loads(hostcost.log_path().read_text())["cpu_share"] == 0.5
    assert hostcost.host_factor("uml") is None
    hostcost.remember("uml", 180, 100, guest_s=600, slots=2, cpu_s=342)  # 95 %: counted
    hostcost.remember("uml", 190, 100, guest_s=600, slots=2)  # a line from before the share was logged
    assert hostcost.host_factor("uml") == hostcost.HostFactor(1.85, 2)


def test_an_unwritable_log_costs_only_the_estimate(cache):
    cache.mkdir()
    (cache / "costs.jsonl").mkdir()  # a directory where the log should be
    hostcost.remember("uml", 180, 100, guest_s=600, slots=2)
    assert hostcost.host_factor("uml") is None


def test_the_cost_line_shows_the_model_and_the_model_scaled_by_this_host():
    specs = expand(parse_experiments(SCENARIO, "x.yaml"), "c")
    parts = [[0], [1], [2], [3]]
    estimate = 2 * estimated_wall_s(specs[0], vm=True, engine="uml")
    line = cost_line(specs, parts, 2400.0, "uml", 2, hostcost.HostFactor(2.5, 3))
    assert f"(estimated {estimate:.0f} host s; {estimate * 2.5:.0f} scaled x2.50, this host's last 3 sessions" in line
    assert "scaled" not in cost_line(specs, parts, 2400.0, "uml", 2)
    quiet = cost_line(specs, parts, 2400.0, "uml", 2, cpu_s=4560.0)
    assert quiet.endswith("; the guests were on CPU 95% of the time")
    loaded = cost_line(specs, parts, 2400.0, "uml", 2, cpu_s=2400.0)
    assert loaded.endswith("; the guests were on CPU 50% of the time: other work ran beside them, so this host's "
                           "later estimates leave this session out")


def test_list_show_and_the_dry_run_scale_the_vm_estimate_by_this_hosts_sessions(cache, tmp_path, monkeypatch):
    monkeypatch.setattr("cctest.cli.main.vm_engine", lambda: "uml")
    f = tmp_path / "e.yaml"
    f.write_text(SCENARIO)

    def vm_estimates() -> tuple[float, float]:
        listed = json.loads(CliRunner().invoke(main, ["list", "-f", str(f), "--json"]).output)[0]["estimate_s"]
        planned = json.loads(CliRunner().invoke(main, ["run", "c", "-f", str(f), "--dry-run", "--json"]).output)
        return listed["vm"], sum(run["estimate_s"]["vm"] for run in planned)

    before = vm_estimates()
    hostcost.remember("uml", 300, 100, guest_s=600, slots=2)
    after = vm_estimates()
    assert after == pytest.approx((before[0] * 3, before[1] * 3))
    table = CliRunner().invoke(main, ["list", "-f", str(f)], env={"COLUMNS": "300"}).output
    assert "scaled x3.00, this host's last 1 session against the model" in " ".join(table.split())
    shown = CliRunner().invoke(main, ["show", "c", "-f", str(f)]).output
    assert "(cost model scaled x3.00, this host's last 1 session against the model)" in " ".join(shown.split())
