"""`cctest clean` never harms: it waits for no one, kills only the processes the journal names (and
only while they are still those processes), deletes only what the journal names, keeps the journal
while something is left to undo, and leaves a module loaded again after the crash alone. Real
processes throughout (sleep, a second Python holding the lock); only /sys/module is a directory
given to `clean`, because loading kernel modules here would touch the host."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cctest.base import filelock
from cctest.host import journal
from cctest.host.journal import Journal, JournalError, is_same_process, process_start_time
from cctest.run import cleanup
from cctest.run.cleanup import CleanRefused, clean
from tests import REPO


def sleeper(*argv: str, command: str = "iperf3") -> subprocess.Popen:
    """A process that runs as `command` (argv[0]; Python underneath): clean kills only programs cctest
    starts, so the stand-ins for its processes are named as one."""
    return subprocess.Popen([command, "-c", "import time; time.sleep(120)", *argv], executable=sys.executable)


def alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def machine_wide_names():
    """--force matches by name machine-wide (Mininet host shells, cc* links, doctor probe namespaces): a
    test that forces, and a test that makes or counts look-alikes of those names, holds this lock, so
    that no two of them overlap, in parallel workers (pytest -n) or in two test sessions. A lock
    file shared on purpose, one per user: flock(2), released when its holder ends, however it ends."""
    lock = filelock.open_lock(Path(tempfile.gettempdir()) / f"cctest-tests-machine-wide-names-{os.getuid()}.lock")
    filelock.take(lock, exclusive=True)
    yield
    filelock.release(lock)


@pytest.fixture
def no_real_run(machine_wide_names):
    """--force matches by name machine-wide: never while a real run on this machine holds its lock
    (taken after machine_wide_names, so that two of these tests never find each other holding it)."""
    lock = journal.take_lock(journal.STATE_DIR) if (journal.STATE_DIR / "lock").exists() else None
    if lock is None and (journal.STATE_DIR / "lock").exists():
        pytest.skip("a cctest run is active on this machine; --force would touch it")
    yield  # (no lock file: no run has ever been active since boot)
    if lock is not None:
        journal.unlock(lock)


def killed_journal(state_dir: Path, **data) -> Path:
    """The journal a SIGKILLed run leaves: active.json without anyone holding the lock."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "active.json"
    path.write_text(json.dumps({"pid": 999999, "processes": [], "modules": [], "links": [], "hosts": [],
                                "sysctls": {}, **data}))
    return path


def test_clean_refuses_while_a_run_holds_the_lock(tmp_path, procs, no_real_run):
    victim = sleeper()
    procs.append(victim)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from cctest.host.journal import Journal; "
         f"j = Journal(Path({str(tmp_path)!r})); j.acquire('test'); j.add_process({victim.pid}, 'sleep'); "
         "print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    procs.append(holder)
    assert holder.stdout.readline().strip() == "ready"
    with pytest.raises(CleanRefused, match=rf"^a run is active \(pid {holder.pid}\); let it finish, or use --force$"):
        clean(tmp_path)
    result = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "CCTEST_STATE_DIR": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: a run is active (pid {holder.pid}); let it finish, or use --force"]
    time.sleep(0.2)
    assert alive(victim) and (tmp_path / "active.json").exists()
    # --force overrides, and kills what the journal names
    actions = clean(tmp_path, force=True)
    assert f"killed sleep (pid {victim.pid})" in actions
    victim.wait(timeout=5)
    holder.stdin.close()
    holder.wait(timeout=10)


def test_a_second_run_is_refused_naming_the_holder(tmp_path):
    first = Journal(tmp_path)
    first.acquire("first")
    try:
        with pytest.raises(journal.RunLockedError, match=rf"a run is active \(pid {os.getpid()}\)"):
            Journal(tmp_path).acquire("second")
    finally:
        first.finish()


def test_start_time_names_one_process(procs):
    proc = sleeper()
    procs.append(proc)
    start = process_start_time(proc.pid)
    assert isinstance(start, int) and start > 0
    assert is_same_process(proc.pid, start)
    assert not is_same_process(proc.pid, start + 1)  # the PID, reused by another process
    assert not is_same_process(proc.pid, None)  # journaled without a start time: unknown, never killed
    assert not is_same_process(1, process_start_time(1))  # never init
    proc.kill()
    proc.wait()
    assert process_start_time(proc.pid) is None and not is_same_process(proc.pid, start)


def test_clean_kills_a_journaled_process_only_while_it_is_that_process(tmp_path, procs):
    ours, reused = sleeper(), sleeper()
    procs += [ours, reused]
    killed_journal(tmp_path, processes=[
        {"pid": ours.pid, "what": "iperf3 client", "start": process_start_time(ours.pid)},
        # the journaled process ended and the kernel gave its PID to an unrelated one
        {"pid": reused.pid, "what": "iperf3 server", "start": process_start_time(reused.pid) - 7},
        {"pid": 1, "what": "init", "start": process_start_time(1)},
    ])
    actions = clean(tmp_path)
    assert f"killed iperf3 client (pid {ours.pid})" in actions
    assert ours.wait(timeout=5) == -9
    time.sleep(0.2)
    assert alive(reused)
    assert not any("reused" in a or f"pid {reused.pid}" in a or "init" in a for a in actions)
    assert not (tmp_path / "active.json").exists()


def test_ended_processes_leave_the_journal(tmp_path, procs):
    j = Journal(tmp_path)
    j.acquire("sweep")
    try:
        first, second = sleeper(), sleeper()
        procs += [first, second]
        j.add_process(first.pid, "iperf3 server")
        first.kill()
        first.wait()  # reaped: its PID is free for anyone
        j.add_process(second.pid, "iperf3 server")
        entries = json.loads((tmp_path / "active.json").read_text())["processes"]
        assert [e["pid"] for e in entries] == [second.pid]
        assert entries[0]["start"] == process_start_time(second.pid)
    finally:
        j.finish()


def test_without_a_journal_clean_touches_nothing_unless_forced(tmp_path, procs, no_real_run):
    # A process that looks like a Mininet host shell of a cctest run, but no journal names it.
    lookalike = sleeper("mininet:ccsnd0")
    procs.append(lookalike)
    time.sleep(0.2)
    assert clean(tmp_path) == []
    time.sleep(0.2)
    assert alive(lookalike)
    result = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "CCTEST_STATE_DIR": str(tmp_path)})
    assert result.returncode == 0 and "--force" in result.stdout and alive(lookalike)
    actions = clean(tmp_path, force=True)
    assert f"killed Mininet host shell (pid {lookalike.pid})" in actions
    lookalike.wait(timeout=5)


def test_journaled_host_shells_are_cleaned_by_identity_never_by_name(tmp_path, procs, machine_wide_names):
    """Host shells were once killed by `pgrep -f` of their journaled names; now only as the
    journaled processes they are (pid and start time), a look-alike of a journaled name is left."""
    ours, lookalike, other = sleeper("mininet:ccsnd0"), sleeper("mininet:ccsnd0"), sleeper("mininet:ccsnd1")
    procs += [ours, lookalike, other]
    time.sleep(0.2)
    killed_journal(tmp_path, hosts=["ccsnd0"], processes=[
        {"pid": ours.pid, "what": "Mininet host shell", "start": process_start_time(ours.pid)}])
    assert f"killed Mininet host shell (pid {ours.pid})" in clean(tmp_path)
    ours.wait(timeout=5)
    time.sleep(0.2)
    assert alive(other) and alive(lookalike)


def test_journal_is_kept_while_something_is_left_to_undo(tmp_path, monkeypatch):
    monkeypatch.setattr(cleanup, "ROOT_SYSCTLS", ("net.cctest_no_such_key",))  # as if cctest set one
    path = killed_journal(tmp_path, sysctls={"net.cctest_no_such_key": "1"})
    actions = clean(tmp_path)
    assert "could not restore sysctl net.cctest_no_such_key=1" in actions
    assert path.exists() and json.loads(path.read_text())["sysctls"] == {"net.cctest_no_such_key": "1"}


def test_clean_removes_the_tracefs_instances_a_killed_run_left_and_no_other(tmp_path, monkeypatch):
    """A run's tracefs instance keeps tracing after the run is killed (and after any unmount): `clean`
    removes the ones the journal names, through the mounted tracefs (a directory here: this host has
    no tracefs), and keeps the journal naming one it cannot remove."""
    from cctest.host import tracefs

    root = tmp_path / "tracing"
    for name in ("cctest-4242-1", "cctest-4242-2", "someone-elses"):
        (root / "instances" / name).mkdir(parents=True)
    (root / "instances" / "cctest-4242-2" / "trace_pipe").write_text("")  # busy: rmdir fails
    monkeypatch.setattr(tracefs, "mounted", lambda: root)
    path = killed_journal(tmp_path / "state", tracefs_instances=["cctest-4242-1", "cctest-4242-2"])
    actions = clean(tmp_path / "state")
    assert "removed tracefs instance cctest-4242-1" in actions
    assert any(a.startswith("could not remove cctest-4242-2: remove tracefs instance") for a in actions)
    assert sorted(p.name for p in (root / "instances").iterdir()) == ["cctest-4242-2", "someone-elses"]
    assert json.loads(path.read_text())["tracefs_instances"] == ["cctest-4242-2"]
    (root / "instances" / "cctest-4242-2" / "trace_pipe").unlink()
    assert clean(tmp_path / "state")[-1] == f"removed {path}"
    assert sorted(p.name for p in (root / "instances").iterdir()) == ["someone-elses"]


def test_a_recorder_journals_its_instance_before_making_it_and_forgets_it_once_removed(tmp_path):
    from cctest.host import tracefs

    class Told:
        def __init__(self) -> None:
            self.names: list[str] = []

        def add_tracefs_instance(self, name: str) -> None:
            assert not (tmp_path / "instances" / name).exists()  # before mkdir
            self.names.append(name)

        def tracefs_instance_removed(self, name: str) -> None:
            self.names.remove(name)

    (tmp_path / "instances").mkdir()
    told = Told()
    recorder = tracefs.Recorder(tmp_path, [("tcp", "tcp_probe", "")], tmp_path / "log", told)
    with pytest.raises(tracefs.TracefsError):  # a directory, not tracefs: no events to enable
        recorder.start()
    # what start made stays (a real instance's files go with its rmdir): so does its journal entry
    assert told.names == [recorder.name] and recorder.dir.is_dir()
    for made in recorder.dir.iterdir():
        made.unlink()
    recorder.close()
    assert told.names == [] and not recorder.dir.exists()


def fake_module(sys_module: Path, name: str, text_address: str) -> None:
    (sys_module / name / "sections").mkdir(parents=True, exist_ok=True)
    (sys_module / name / "sections" / ".text").write_text(text_address + "\n")


def test_a_module_loaded_again_after_the_crash_is_left_alone(tmp_path, monkeypatch):
    sys_module = tmp_path / "sys_module"
    name = "cctest_test_no_such_module"
    monkeypatch.setattr(cleanup, "OWN_MODULES", (name,))  # as if cctest loaded it
    fake_module(sys_module, name, "0xffffffffc0b00000")  # where the user's new load sits
    killed_journal(tmp_path / "state", modules=[{"name": name, "identity": "0xffffffffc0a00000"}])
    actions = clean(tmp_path / "state", sys_module=sys_module)
    assert f"left module {name} loaded: it was loaded again after the run" in actions
    assert not any(a.startswith("unloaded") for a in actions)
    # a module whose load was journaled but not confirmed (killed mid-insmod): not unloaded either
    killed_journal(tmp_path / "state", modules=[{"name": name, "identity": None}])
    actions = clean(tmp_path / "state", sys_module=sys_module)
    assert any(a.startswith(f"left module {name} loaded: the run was killed while loading it") for a in actions)
    # the very load the run made is unloaded
    killed_journal(tmp_path / "state", modules=[{"name": name, "identity": "0xffffffffc0b00000"}])
    assert f"unloaded module {name}" in clean(tmp_path / "state", sys_module=sys_module)


@pytest.mark.parametrize("content", ["[]", "3", '"x"', "null", '{"processes": "x"}',
                                     '{"processes": [{"pid": "1"}]}', '{"modules": [1]}', "{not json", "\xff",
                                     '{"tracefs_instances": ["../../../tmp"]}', '{"tracefs_instances": ["other"]}'])
def test_a_journal_that_is_not_one_is_a_one_line_error(tmp_path, content):
    tmp_path.joinpath("active.json").write_bytes(content.encode("latin-1"))
    with pytest.raises(JournalError):
        clean(tmp_path)
    result = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "CCTEST_STATE_DIR": str(tmp_path)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "active.json" in lines[0] and "Traceback" not in result.stderr


def test_runs_racing_for_one_name_get_distinct_directories(tmp_path):
    from cctest.host.rundir import new_run_dir
    from cctest.model.plan import expand
    from cctest.model.scenario import parse_experiments

    spec = expand(parse_experiments("scenarios: {s: {link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}, "
                                    "duration_s: 5, flows: [{cc: cubic}]}}", "x.yaml"), "s")[0]
    made, errors = [], []
    barrier = threading.Barrier(16)

    def one():
        barrier.wait()
        try:
            for _ in range(5):
                made.append(new_run_dir(tmp_path, spec))
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(made)) == 80 and all((d / "scenario.yaml").exists() for d in made)


def test_force_removes_a_killed_doctor_probe_namespace(tmp_path, no_real_run):
    ns = f"cctest-doctor-test{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here (needs root)")
    try:
        assert clean(tmp_path) == []  # without --force: a name pattern, not touched
        assert ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"deleted network namespace {ns}" in clean(tmp_path, force=True)
        assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_doctor_probes_leave_no_namespace_behind(machine_wide_names):
    from cctest.run.doctor import probe_qdisc

    def probe_namespaces() -> list[str]:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return [line.split()[0] for line in out.splitlines() if line.startswith("cctest-doctor-")]

    if os.geteuid() != 0 or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        pytest.skip("probing qdiscs needs root and ip netns")
    before = probe_namespaces()
    # one probe that works and one the kernel refuses: both delete their namespace
    assert probe_qdisc("pfifo") is True
    assert probe_qdisc("cctest-no-such-qdisc") is False
    assert probe_namespaces() == before


# --- a journal root can trust -----------------------------------------------------------------

def test_a_hostile_journal_is_refused_entry_by_entry_and_nothing_is_touched(tmp_path, procs):
    """A journal someone else wrote: a foreign sysctl, foreign links, another program's PID (with its
    true start time), an iperf3 outside the journaled run cgroup, a module cctest never loads, a host
    name cctest never gives. `clean` refuses each in one line, runs nothing, exits 2."""
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    stranger, outsider = sleeper(command="python3"), sleeper()
    procs += [stranger, outsider]
    time.sleep(0.2)
    killed_journal(tmp_path, sysctls={"kernel.core_pattern": "|/tmp/pwn"}, links=["lo", "eth0"],
                   hosts=["sshd"], modules=[{"name": "e1000", "identity": None}],
                   processes=[{"pid": stranger.pid, "what": "iperf3 client",
                               "start": process_start_time(stranger.pid)}])
    result = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "CCTEST_STATE_DIR": str(tmp_path)})
    assert result.returncode == 2, result.stdout + result.stderr
    refused = [line for line in result.stdout.splitlines() if line.startswith("refused ")]
    assert len(refused) == 6, result.stdout
    for expected in ("sysctl kernel.core_pattern=|/tmp/pwn: cctest sets no such sysctl", "delete link lo: not a name",
                     "delete link eth0: not a name", f"kill pid {stranger.pid} (iperf3 client): it runs python3",
                     "unload module e1000: not one cctest loads", "host sshd: not a name"):
        assert sum(expected in line for line in refused) == 1, (expected, refused)
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    assert "lo" in subprocess.run(["ip", "-o", "link", "show", "lo"], capture_output=True, text=True).stdout
    assert alive(stranger) and (tmp_path / "active.json").exists()
    # a process cctest could have started, but outside the run's cgroup, which was killed whole
    killed_journal(tmp_path, cgroup="/sys/fs/cgroup/cctest-run-999999",
                   processes=[{"pid": outsider.pid, "what": "iperf3 client",
                               "start": process_start_time(outsider.pid)}])
    actions = clean(tmp_path)
    assert any(a.startswith(f"refused to kill pid {outsider.pid} (iperf3 client): not in the run's cgroup")
               for a in actions), actions
    time.sleep(0.2)
    assert alive(outsider)


@pytest.mark.parametrize("damage", ["group-writable", "other owner", "symlink", "journal other-writable",
                                    "parent writable by all", "parent of another owner"])
def test_a_state_directory_someone_else_could_write_is_refused(tmp_path, damage):
    state = tmp_path / "shared" / "state"
    killed_journal(state)
    if damage == "parent writable by all":  # another user could rename it away and put their own there
        state.parent.chmod(0o777)
    elif damage == "parent of another owner":
        os.chown(state.parent, 65534, 65534)
    elif damage == "group-writable":
        state.chmod(0o775)
    elif damage == "other owner":
        os.chown(state, 65534, 65534)
    elif damage == "symlink":
        (tmp_path / "link").symlink_to(state)
        state = tmp_path / "link"
    else:
        (state / "active.json").chmod(0o666)
    with pytest.raises(journal.UntrustedStateDir):
        clean(state)
    result = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "CCTEST_STATE_DIR": str(state)})
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "CCTEST_STATE_DIR" in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(journal.UntrustedStateDir):
        Journal(state).acquire("run")


def test_a_state_directory_under_a_sticky_shared_parent_is_accepted(tmp_path):
    # /tmp's mode: writable by all, but only an entry's owner may rename or delete it
    (tmp_path / "shared").mkdir(mode=0o777)
    (tmp_path / "shared").chmod(0o1777)
    j = Journal(tmp_path / "shared" / "state")
    j.acquire("run")
    j.finish()


def test_a_new_state_directory_is_made_for_its_user_alone(tmp_path):
    state = tmp_path / "new" / "state"
    j = Journal(state)
    j.acquire("run")
    try:
        info = os.stat(state)
        assert info.st_uid == os.geteuid() and info.st_mode & 0o077 == 0
    finally:
        j.finish()


def test_a_session_raises_a_root_sysctl_only_where_lower_journals_it_and_restores_it(tmp_path, monkeypatch):
    from cctest.host.net import rootsysctl
    from cctest.model import dumbbell

    proc_sys = tmp_path / "proc-sys"
    monkeypatch.setattr(rootsysctl, "PROC_SYS", proc_sys)
    (key, minimum), = dumbbell.ROOT_SYSCTL_MINIMUMS.items()
    knob = proc_sys / key.replace(".", "/")
    knob.parent.mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir()
    for before, raised in ((str(minimum // 5), True), (str(minimum * 2), False)):
        knob.write_text(before + "\n")
        journal = Journal(state)
        record = rootsysctl.raise_minimums(journal)
        assert record[key]["old"] == before and record[key]["new"] == (str(minimum) if raised else before)
        assert knob.read_text().strip() == record[key]["new"]
        assert journal.data["sysctls"] == ({key: before} if raised else {})  # journaled before it is written
        assert rootsysctl.restore(record, journal) == []
        assert knob.read_text().strip() == before and journal.data["sysctls"] == {}


def test_clean_restores_the_root_sysctls_a_session_raises():
    from cctest.model import dumbbell

    # a crashed session's raise is named in its journal; clean must be allowed to write it back
    assert set(dumbbell.ROOT_SYSCTL_MINIMUMS) <= set(cleanup.ROOT_SYSCTLS)
