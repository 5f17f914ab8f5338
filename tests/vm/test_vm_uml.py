"""The UML engine for real: `cctest run --vm --engine uml` of bbr_cws against CUBIC, its tables
(per-ACK cwnd/srtt and the module's state from tracefs), its meta.json and the guest's dmesg; a
session stopped with SIGTERM on the host; a session resumed with --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cctest.emulation import umlkernel
from cctest.emulation.uml import dmesg_problems
from cctest.host.net import rootsysctl
from cctest.model import dumbbell
from tests import REPO
from tests.vm.harness import require_uml_kernel

pytestmark = pytest.mark.vm

SCENARIOS = REPO / "tests" / "vm" / "uml.yaml"


@pytest.fixture(scope="module")
def uml_run():
    require_uml_kernel()
    out = REPO / "build" / "vm-tests-uml" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    result = subprocess.run([sys.executable, "-m", "cctest", "run", "uml-cws-vs-cubic", "-f", str(SCENARIOS),
                             "--vm", "--engine", "uml", "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = [p.parent for p in out.rglob("meta.json")]
    return out, run_dir


def test_the_run_went_through_uml_with_this_checkouts_kernel(uml_run):
    _, run_dir = uml_run
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "ok", meta["error"]
    assert meta["engine"]["name"] == "uml" and meta["engine"]["time_travel"] == "inf-cpu"
    assert meta["engine"]["kernel"]["inputs_sha256"] == umlkernel.inputs_sha256()
    assert meta["vm"]["clock"] == "virtual" and meta["vm"]["vcpus"] == 1
    assert [m["name"] for m in meta["modules"]] == ["bbr_cws", "cubic"]
    assert not any("trace" in w for w in meta["warnings"]), meta["warnings"]


def test_the_hosts_tcp_buffers_and_the_root_backlog_are_set_and_recorded(uml_run):
    """cctest sets them itself (Mininet's start-up would have, unrecorded): the buffers read back
    from a host's namespace, the backlog raised from the guest kernel's default."""
    _, run_dir = uml_run
    sysctls = json.loads((run_dir / "meta.json").read_text())["sysctls"]
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        assert sysctls[key]["new"] == dumbbell.HOST_TCP_BUFFERS, sysctls
    assert sysctls["net.core.netdev_max_backlog"] == {"old": "1000", "new": "5000", "scope": rootsysctl.SCOPE}


def test_per_ack_cwnd_and_srtt_come_from_tracefs(uml_run):
    _, run_dir = uml_run
    assert (run_dir / "raw" / "tracefs.log").exists() and not (run_dir / "raw" / "bpftrace.log").exists()
    probe = pd.read_parquet(run_dir / "tcp_probe.parquet")
    assert set(probe["flow"]) == {0, 1}
    for _, flow in probe.groupby("flow"):
        assert len(flow) > 100  # 10 s at up to one event per 10 ms
        assert flow["srtt_ms"].min() >= 20 * 0.95  # never below the path's RTT
        assert (flow["snd_cwnd"] > 0).all()
        assert (flow["t_s"].diff().dropna() >= 0.01 - 1e-6).all()  # thinned per socket


def test_the_modules_state_comes_from_tracefs(uml_run):
    _, run_dir = uml_run
    state = pd.read_parquet(run_dir / "cc_state.parquet")
    assert set(state["cc"]) == {"bbr_cws"} and set(state["flow"]) == {0}
    modes = state[state["key"] == "mode"]["value"]
    assert {0, 2} <= set(modes)  # STARTUP, then PROBE_BW
    bw = state[state["key"] == "bw_bps"]["value"]
    assert bw.max() <= 20e6 * 1.1  # BtlBw estimate no higher than the link (plus pacing noise)


def test_the_link_is_filled_and_the_guest_kernel_log_is_clean(uml_run):
    out, run_dir = uml_run
    flows = pd.read_parquet(run_dir / "flows.parquet")
    goodput = (flows["bytes_received"].astype(float) * 8 / flows["duration_s"]).sum()
    assert goodput > 0.9 * 20e6 * 1448 / 1514
    (dmesg,) = out.glob(".uml-dmesg-*.txt")
    text = dmesg.read_text()
    assert "Linux version" in text  # the whole log, from boot
    assert dmesg_problems(text) == []


def _processes_working_in(where: Path) -> list[int]:
    """The pids whose working directory is `where` or below it (a UML guest works in its home)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:  # not a process, or gone
            continue
        if cwd == where or where in cwd.parents:
            found.append(int(proc.name))
    return found


def test_sigterm_to_the_host_session_stops_its_guest_and_keeps_what_was_measured():
    """A batch scheduler or a script ends a session with SIGTERM: the guests are asked to stop, as on
    Ctrl-C, none is left running, and the run directory says the run was interrupted."""
    require_uml_kernel()
    out = REPO / "build" / "vm-tests-uml" / time.strftime("%Y%m%d-%H%M%S-term")
    out.mkdir(parents=True)
    session = subprocess.Popen([sys.executable, "-m", "cctest", "run", "uml-stopped-mid-run", "-f", str(SCENARIOS),
                                "--vm", "--engine", "uml", "--out", str(out)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    manifest = out / ".uml-0" / "manifest.txt"  # the guest names its run directory as the run starts
    deadline = time.monotonic() + 300
    while not (manifest.exists() and manifest.read_text().strip()):
        assert session.poll() is None and time.monotonic() < deadline, session.communicate()
        time.sleep(0.5)
    time.sleep(5)  # the flow is running: 60 s of guest time take longer than this on any host
    assert _processes_working_in(out), "no guest running to stop"
    session.send_signal(signal.SIGTERM)
    stdout, stderr = session.communicate(timeout=180)
    left = _processes_working_in(out)
    for pid in left:  # not left behind by a failing test either
        os.kill(pid, signal.SIGKILL)
    assert session.returncode == 130, stdout[-2000:] + stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == "interrupted: torn down; what was measured is kept"
    assert left == []
    (run_dir,) = [p.parent for p in out.rglob("meta.json")]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "interrupted", meta["error"]
    assert (run_dir / "raw" / "tracefs.log").stat().st_size > 0  # what it measured before the stop
    (dmesg,) = out.glob(".uml-dmesg-*.txt")
    assert dmesg_problems(dmesg.read_text()) == []


def test_a_resumed_session_runs_only_what_out_lacks():
    """A campaign cut short goes on with --resume: the run made already is kept as it is, the
    missing one runs."""
    require_uml_kernel()
    out = REPO / "build" / "vm-tests-uml" / time.strftime("%Y%m%d-%H%M%S-resume")
    env = {**os.environ, "CCTEST_GIT_COMMIT": "c" * 40}  # a clean checkout's, whatever this one's state

    def run(*args: str) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-m", "cctest", "run", "uml-resumed", "-f", str(SCENARIOS), "--vm",
                                 "--engine", "uml", "--out", str(out), *args], cwd=REPO, capture_output=True,
                                text=True, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result

    run("-n", "1")
    (first,) = [p.parent for p in out.rglob("meta.json")]
    before = (first / "meta.json").read_text()
    resumed = run("-n", "2", "--resume")
    assert f"--resume: 1 of 2 runs are in {out} already" in " ".join(resumed.stdout.split())
    metas = sorted((json.loads(p.read_text()) for p in out.rglob("meta.json")), key=lambda m: m["repetition"])
    assert [(m["repetition"], m["status"]) for m in metas] == [(0, "ok"), (1, "ok")]
    assert (first / "meta.json").read_text() == before  # kept, not made again
    assert "booting 1 guest(s)" in resumed.stdout
    again = " ".join(run("-n", "2", "--resume").stdout.split())
    assert f"--resume: 2 of 2 runs are in {out} already" in again and "booting" not in again  # all made
    assert len(list(out.rglob("meta.json"))) == 2
    dmesgs = list(out.glob(".uml-dmesg-*.txt"))  # each guest's kernel log, kept beside the runs
    assert dmesgs and all(dmesg_problems(d.read_text()) == [] for d in dmesgs), dmesgs
