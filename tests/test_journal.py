"""`cctest clean` never harms: it waits for no one, kills only the processes the journal names (and
only while they are still those processes), deletes only what the journal names, keeps the journal
while something is left to undo, and leaves a module loaded again after the crash alone. Real
processes throughout (sleep, a second Python holding the lock); only /sys/module is a directory
given to `clean`, because loading kernel modules here would touch the host."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cctest import journal
from cctest.journal import CleanRefused, Journal, JournalError, clean, is_same_process, process_start_time

REPO = Path(__file__).resolve().parent.parent


def sleeper(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *argv])


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
def no_real_run():
    """--force matches by name machine-wide: never while a real run on this machine holds its lock."""
    lock = journal._lock(journal.STATE_DIR) if (journal.STATE_DIR / "lock").exists() else None
    if lock is None and (journal.STATE_DIR / "lock").exists():
        pytest.skip("a cctest run is active on this machine; --force would touch it")
    yield  # (no lock file: no run has ever been active since boot)
    if lock is not None:
        journal._unlock(lock)


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
        [sys.executable, "-c", "import sys; from pathlib import Path; from cctest.journal import Journal; "
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
    assert result.stderr.strip().splitlines() == [f"error: a run is active (pid {holder.pid}); let it finish, or use --force"]
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


def test_journaled_host_names_are_cleaned_others_are_not(tmp_path, procs):
    ours, other = sleeper("mininet:ccsnd0"), sleeper("mininet:ccsnd1")
    procs += [ours, other]
    time.sleep(0.2)
    killed_journal(tmp_path, hosts=["ccsnd0"])
    assert f"killed Mininet host shell (pid {ours.pid})" in clean(tmp_path)
    ours.wait(timeout=5)
    time.sleep(0.2)
    assert alive(other)


def test_journal_is_kept_while_something_is_left_to_undo(tmp_path):
    path = killed_journal(tmp_path, sysctls={"net.cctest_no_such_key": "1"})
    actions = clean(tmp_path)
    assert "could not restore sysctl net.cctest_no_such_key=1" in actions
    assert path.exists() and json.loads(path.read_text())["sysctls"] == {"net.cctest_no_such_key": "1"}


def fake_module(sys_module: Path, name: str, text_address: str) -> None:
    (sys_module / name / "sections").mkdir(parents=True, exist_ok=True)
    (sys_module / name / "sections" / ".text").write_text(text_address + "\n")


def test_a_module_loaded_again_after_the_crash_is_left_alone(tmp_path):
    sys_module = tmp_path / "sys_module"
    name = "cctest_test_no_such_module"
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
                                     '{"processes": [{"pid": "1"}]}', '{"modules": [1]}', "{not json", "\xff"])
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
    from cctest.plan import expand
    from cctest.rundir import new_run_dir
    from cctest.scenario import parse_experiments

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


def test_doctor_probes_leave_no_namespace_behind():
    from cctest.doctor import probe_qdisc

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
