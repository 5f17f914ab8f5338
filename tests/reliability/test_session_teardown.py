"""What a --vm session keeps when it is interrupted or its guest dies, without booting a
VM: vng is replaced by a stand-in that behaves as a guest does (it runs until asked to stop through
the stop file, as the guest's cctest does, or prints an oops and dies)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cctest.emulation import vm
from cctest.model import guestplan
from cctest.run import session
from tests import REPO

# A stand-in for vng: finds the guest command file (the last argument: "sh <file>"), reads the stop
# file's path from it, prints a console line, and ends with 130 once the stop file appears (as the
# guest's interrupted run does) -- or, with FAKE_OOPS set, prints an oops and exits 255.
FAKE_VNG = textwrap.dedent("""\
    #!/bin/sh
    for last; do :; done
    file=${last#sh }; file=${file#\\'}; file=${file%\\'}
    stop=$(sed -n 's/.*CCTEST_STOP_FILE=\\([^ ]*\\).*/\\1/p' "$file")
    echo "[    1.000000] Linux version 6.1 (fake)"
    if [ -n "$FAKE_OOPS" ]; then
        echo "[   12.345678] BUG: kernel NULL pointer dereference, address: 0000000000000010"
        echo "[   12.345900] Oops: 0000 [#1] PREEMPT SMP NOPTI"
        exit 255
    fi
    while [ ! -e "$stop" ]; do sleep 0.1; done
    echo "guest: interrupted: torn down; what was measured is kept"
    exit 130
""")


@pytest.fixture
def fake_vng(tmp_path, monkeypatch):
    path = tmp_path / "vng"
    path.write_text(FAKE_VNG)
    path.chmod(0o755)
    monkeypatch.setattr(vm, "vng_path", lambda: str(path))
    return path


def test_a_vm_runs_in_its_own_session_and_stop_asks_its_guest_to_end(tmp_path, fake_vng):
    out = tmp_path / "out"
    out.mkdir()
    proc = vm.start(Path("/boot/vmlinuz-fake"), ["true"], [out], vm.VMClock(), log=out / ".vm-0.log")
    try:
        time.sleep(0.5)
        # a Ctrl-C on our terminal (SIGINT to our process group) no longer reaches QEMU
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0) and os.getpgid(proc.pid) == proc.pid
        assert proc.poll() is None and proc.stop_file.parent == out
        started = time.monotonic()
        vm.stop(proc, grace_s=20)
        assert proc.returncode == 130 and time.monotonic() - started < 10  # it ended itself, not killed
        assert "interrupted: torn down" in (out / ".vm-0.log").read_text()
        assert not proc.stop_file.exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_the_guest_run_turns_the_stop_file_into_a_keyboard_interrupt(tmp_path):
    stop = tmp_path / ".stop"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""\
        import time
        from cctest.emulation import vm
        try:
            vm.watch_stop_file(poll_s=0.05)
            print("ready", flush=True)
            time.sleep(60)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise SystemExit(130)
    """)], cwd=REPO, env={**os.environ, vm.STOP_FILE_ENV: str(stop)}, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    stop.touch()
    assert child.wait(timeout=20) == 130 and child.stdout.read().strip() == "interrupted"


def test_a_guest_crash_is_reported_naming_the_oops_and_its_console_kept(tmp_path, fake_vng, monkeypatch):
    """A guest that dies said only 'exited with 255'; now the session names the oops line, and the
    console is in each of the VM's run directories."""
    from rich.console import Console

    monkeypatch.setenv("FAKE_OOPS", "1")
    out = tmp_path / "out"
    run_dir = out / "scenario" / "20261124-base-r0"
    run_dir.mkdir(parents=True)
    real_start = vm.start

    def start_and_record(kernel, cmd, rwdirs, clock, log=None, **kw):
        manifest = Path(guestplan.read(Path(cmd[-1])).manifest)  # the guest's one argument: its plan file
        manifest.write_text(f"{run_dir}\n")  # the guest records its run directory before the run
        return real_start(kernel, cmd, rwdirs, clock, log, **kw)

    monkeypatch.setattr(vm, "start", start_and_record)
    monkeypatch.setattr(session, "finalize_each", lambda dirs, console, failures: None)
    opts = session.RunOptions(source=Path("experiments.yaml"), names=["s"], out=out, mode="vm", kernel=None, kvm=False,
                              clock=vm.VMClock(), jobs=1)
    from cctest.emulation import engines
    from cctest.model.plan import expand
    from cctest.model.scenario import parse_experiments

    specs = expand(parse_experiments("scenarios:\n  s:\n    link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}\n"
                                     "    flows: [{cc: cubic}]\n    duration_s: 5\n", "exp.yaml"), "s")
    with pytest.raises(session.SessionError) as caught:
        engine = engines.QemuEngine(Path("/boot/vmlinuz-fake"), vm.VMClock())
        session._boot_and_ingest(specs, opts, Console(file=open(os.devnull, "w")), engine)
    message = str(caught.value)
    assert message.startswith("the guest kernel crashed: BUG: kernel NULL pointer dereference"), message
    assert "guest-console.log" in message
    assert "Oops: 0000" in (run_dir / session.GUEST_CONSOLE).read_text()
