"""The run's cgroup and the tracefs mount, for real on this machine: a session process that moves
itself into its cgroup, starts a process it never journals and is SIGKILLed leaves nothing that
`cctest clean` does not kill; teardown kills strays and removes the cgroup; without cgroup v2 the
session says so and runs on; a journal can name only cctest's own cgroups and tracefs mountpoints."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from cctest.host import cgroup, tracefs
from cctest.host.journal import Journal, JournalError
from cctest.run.cleanup import clean
from cctest.run.session import enter_cgroup
from tests import REPO

needs_cgroup = pytest.mark.skipif(cgroup.unavailable_reason() is not None,
                                  reason=f"no writable cgroup v2 here: {cgroup.unavailable_reason()}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose (reaped by whoever its parent is)
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def wait_gone(pid: int, timeout_s: float = 5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


# Named iperf3 (/proc/PID/comm), and, like iperf3 -J, writes its results only when it ends on SIGTERM.
FAKE_IPERF3 = (
    "import signal, sys, time\n"
    "open('/proc/self/comm', 'w').write('iperf3')\n"
    "def done(*_):\n"
    "    open(sys.argv[1] + '/results.json', 'w').write('{}')\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, done)\n"
    "time.sleep(300)\n")
SESSION = f"""
FAKE_IPERF3 = {FAKE_IPERF3!r}
import subprocess, sys, time
from pathlib import Path
from rich.console import Console
from cctest.host.journal import Journal
from cctest.run.session import enter_cgroup, close_cgroup
j = Journal(Path(sys.argv[1]))
j.acquire("test")
group = enter_cgroup(j, Console(stderr=True))
# started and never journaled (as if killed between spawn and journal write), in its own session
stray = subprocess.Popen(["sleep", "300"] if sys.argv[2] != "iperf3" else [sys.executable, "-c", FAKE_IPERF3,
                         sys.argv[1]], start_new_session=True)
if sys.argv[2] == "iperf3":
    time.sleep(1)  # its SIGTERM handler in place
print(group.path, stray.pid, flush=True)
if sys.argv[2] == "teardown":
    sys.stdin.readline()
    close_cgroup(group, j, Console(stderr=True))
    j.finish()
    from cctest.host.cgroup import own_cgroup
    print(own_cgroup(), flush=True)
else:
    time.sleep(300)
"""


def session(state_dir: Path, mode: str) -> tuple[subprocess.Popen, Path, int]:
    proc = subprocess.Popen([sys.executable, "-c", SESSION, str(state_dir), mode], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    path, pid = proc.stdout.readline().split()
    return proc, Path(path), int(pid)


@needs_cgroup
def test_clean_after_sigkill_kills_the_cgroup_with_what_was_never_journaled(tmp_path):
    proc, path, stray = session(tmp_path, "sigkill")
    try:
        assert path.name == f"{cgroup.PREFIX}{proc.pid}" and path.parent == cgroup.own_cgroup()
        assert set(cgroup.procs(path)) == {proc.pid, stray}
        assert json.loads((tmp_path / "active.json").read_text())["cgroup"] == str(path)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert alive(stray) and path.is_dir()  # SIGKILL allows no teardown
        result = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True, cwd=REPO,
                                env={**os.environ, "CCTEST_STATE_DIR": str(tmp_path), "COLUMNS": "40"})
        assert result.returncode == 0
        # one line, however long the path and narrow the terminal
        assert f"killed 1 process(es) in the run's cgroup and removed {path}" in result.stdout.splitlines()
        assert wait_gone(stray) and not path.exists() and not (tmp_path / "active.json").exists()
    finally:
        if path.exists():
            cgroup.kill_and_remove(path)


@needs_cgroup
def test_teardown_leaves_the_cgroup_kills_strays_and_removes_it(tmp_path):
    proc, path, stray = session(tmp_path, "teardown")
    try:
        proc.stdin.write("\n")
        proc.stdin.flush()
        home = proc.stdout.readline().strip()
        assert proc.wait(timeout=20) == 0
        assert home == str(cgroup.own_cgroup())  # back where it started (as this test's process is)
        assert wait_gone(stray) and not path.exists() and not (tmp_path / "active.json").exists()
    finally:
        if path.exists():
            cgroup.kill_and_remove(path)


@needs_cgroup
def test_without_cgroup_kill_each_process_is_killed_forks_included(tmp_path):
    path = cgroup.own_cgroup() / f"{cgroup.PREFIX}{os.getpid()}"
    path.mkdir()
    try:
        # a process that keeps forking: the per-PID pass must repeat until the cgroup is empty
        forker = subprocess.Popen(["sh", "-c", "while :; do sleep 30 & sleep 0.01; done"], start_new_session=True,
                                  preexec_fn=lambda: (path / "cgroup.procs").write_text(f"{os.getpid()}\n"))
        time.sleep(0.5)
        assert len(cgroup.procs(path)) > 5
        assert cgroup.kill(path, atomic=False) > 5
        assert cgroup.procs(path) == []
        forker.wait(timeout=5)
    finally:
        cgroup.kill_and_remove(path)
    assert not path.exists()


def test_without_cgroup_v2_the_session_says_so_and_runs_on(tmp_path, monkeypatch):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
                         "25 22 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
    monkeypatch.setattr(cgroup, "MOUNTINFO", mountinfo)
    assert cgroup.unavailable_reason() == "cgroup v2 is not mounted"
    j = Journal(tmp_path / "state")
    j.acquire("test")
    console = Console(record=True, width=400)
    try:
        assert enter_cgroup(j, console) is None
        assert json.loads(j.path.read_text())["cgroup"] is None
    finally:
        j.finish()
    assert console.export_text().strip() == (
        "notice: no cgroup for this run (cgroup v2 is not mounted): after a SIGKILL, `cctest clean` finds only the "
        "processes the journal names")


def test_doctor_reports_the_cgroup():
    from cctest.run.doctor import run_cgroup

    check = run_cgroup()
    assert check.ok == (cgroup.unavailable_reason() is None) and check.needed_for == "optional"
    assert check.detail == (f"each run gets one under {cgroup.cgroup2_mount()}" if check.ok
                            else cgroup.unavailable_reason())


@pytest.mark.parametrize("group", ["/sys/fs/cgroup/system.slice", "/sys/fs/cgroup/cctest-run-1/../init.scope",
                                   "cctest-run-1", 7])
def test_a_journal_can_name_only_a_cctest_cgroup(tmp_path, group):
    (tmp_path / "active.json").write_text(json.dumps({"processes": [], "cgroup": group}))
    with pytest.raises(JournalError, match="cgroup must be a cctest-run-PID directory"):
        clean(tmp_path)


def test_a_cctest_named_directory_outside_the_hierarchy_is_left_alone(tmp_path):
    fake = tmp_path / "cctest-run-12"
    (fake / "cgroup.procs").parent.mkdir()
    (fake / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "active.json").write_text(json.dumps({"processes": [], "cgroup": str(fake)}))
    actions = clean(tmp_path / "state")
    assert any(a.startswith(f"could not remove cgroup {fake}: ") and "left alone" in a for a in actions)
    assert fake.is_dir() and (tmp_path / "state" / "active.json").exists()


def test_a_journal_can_name_only_tracefs_mountpoints(tmp_path):
    (tmp_path / "active.json").write_text(json.dumps({"processes": [], "mounts": ["/proc"]}))
    with pytest.raises(JournalError, match="mounts must list tracefs mountpoints"):
        clean(tmp_path)


def test_tracefs_is_mounted_only_if_absent_and_clean_unmounts_the_one_cctest_made(tmp_path):
    journaled: list[str] = []
    if tracefs.mounted() is not None:
        # there before: neither mounted nor journaled, so never unmounted
        assert tracefs.mount_if_absent(journaled.append) is None and journaled == []
        return
    if os.geteuid() != 0:
        pytest.skip("mounting tracefs needs root")
    try:
        assert tracefs.mount_if_absent(journaled.append) == tracefs.MOUNTPOINT
        assert journaled == [str(tracefs.MOUNTPOINT)] and tracefs.is_tracefs_mount(tracefs.MOUNTPOINT)
        assert tracefs.mount_if_absent(journaled.append) is None  # now there: not mounted twice
        # as a SIGKILLed run leaves it
        (tmp_path / "active.json").write_text(json.dumps({"processes": [], "mounts": journaled}))
        assert clean(tmp_path) == [f"unmounted tracefs at {tracefs.MOUNTPOINT}", f"removed {tmp_path / 'active.json'}"]
        assert not tracefs.is_tracefs_mount(tracefs.MOUNTPOINT) and tracefs.mounted() is None
        # journaled, but gone (or never made): nothing to do
        (tmp_path / "active.json").write_text(json.dumps({"processes": [], "mounts": journaled}))
        assert clean(tmp_path) == [f"removed {tmp_path / 'active.json'}"]
    finally:
        while tracefs.is_tracefs_mount(tracefs.MOUNTPOINT):
            subprocess.run(["umount", str(tracefs.MOUNTPOINT)])


@needs_cgroup
def test_clean_asks_iperf3_to_end_with_sigterm_before_the_cgroup_kill(tmp_path):
    """iperf3 -J writes its results only as it exits: SIGKILL leaves 0 bytes. The cgroup kill (clean,
    and teardown's strays) sends SIGTERM to iperf3 first and waits for it."""
    proc, path, stray = session(tmp_path, "iperf3")
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert alive(stray) and not (tmp_path / "results.json").exists()
        actions = clean(tmp_path)
        assert f"killed 1 process(es) in the run's cgroup and removed {path}" in actions
        assert (tmp_path / "results.json").read_text() == "{}"  # written on SIGTERM, before any SIGKILL
        assert wait_gone(stray) and not path.exists()
    finally:
        if path.exists():
            cgroup.kill_and_remove(path)
