"""Two `--vm` invocations at once: they never build modules into one directory together (a second
build waits, saying so in one line), a rebuild waits for the session running with the current
build, and a second session into the same --out is refused with one line (exit 2). Real processes,
real flock and a real module build (a one-file module against the VM kernel's headers)."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cctest.emulation import vm
from cctest.kernel import kmod
from tests import REPO

TINY_C = textwrap.dedent("""\
    #include <linux/module.h>
    static int __init tiny_init(void) { return 0; }
    static void __exit tiny_exit(void) {}
    module_init(tiny_init);
    module_exit(tiny_exit);
    MODULE_LICENSE("GPL");
    MODULE_DESCRIPTION("cctest lock test %s");
""")


def release_with_headers() -> str:
    try:
        release = kmod.release_of_kernel_image(vm.pick_kernel(None))
    except Exception as error:  # noqa: BLE001 - any reason is a reason to skip
        pytest.skip(f"no VM kernel here: {error}")
    if not (kmod.headers_dir(release) / "Makefile").exists():
        pytest.skip(f"no kernel headers for {release}")
    return release


def kmod_process(tmp_path: Path, body: str) -> subprocess.Popen:
    """A Python process whose kmod builds tmp_path/modules into tmp_path/build."""
    code = (f"import sys; from pathlib import Path; from cctest.kernel import kmod; "
            f"kmod.MODULES_DIR = Path({str(tmp_path / 'modules')!r}); "
            f"kmod.BUILD_DIR = Path({str(tmp_path / 'build')!r})\n"
            + body)
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finished_within(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def test_builds_wait_for_each_other_and_a_rebuild_for_the_session_using_the_build(tmp_path):
    release = release_with_headers()
    tree = tmp_path / "modules" / "tiny"
    tree.mkdir(parents=True)
    (tree / "Kbuild").write_text("obj-m := tiny.o\n")
    (tree / "tiny.c").write_text(TINY_C % "v1")
    ko = tmp_path / "build" / release / "tiny" / "tiny.ko"
    # a --vm session: builds, then holds the build while its guests run
    session = kmod_process(tmp_path, f"with kmod.using_build({release!r}) as built:\n"
                                     "    print(sorted(built), flush=True); sys.stdin.readline()")
    try:
        assert session.stdout.readline().strip() == "['tiny']" and ko.exists()
        built_at = ko.stat().st_mtime_ns
        # the same sources: a second invocation uses the build beside the session, without waiting
        second = kmod_process(tmp_path, f"print(sorted(kmod.build({release!r})))")
        assert finished_within(second, 30) and second.returncode == 0
        assert second.stdout.read().strip() == "['tiny']" and second.stderr.read() == ""
        assert ko.stat().st_mtime_ns == built_at
        # changed sources: the rebuild waits for the session, and says so once
        (tree / "tiny.c").write_text(TINY_C % "v2")
        rebuild = kmod_process(tmp_path, f"kmod.build({release!r}); print('rebuilt', flush=True)")
        assert rebuild.stderr.readline().strip() == (
            f"waiting to rebuild the modules for {release}: another cctest is running with the current build")
        assert not finished_within(rebuild, 1)
        assert ko.stat().st_mtime_ns == built_at  # the session's .ko is untouched while it runs
        session.stdin.write("\n")
        session.stdin.flush()
        assert session.wait(timeout=10) == 0
        assert finished_within(rebuild, 60) and rebuild.returncode == 0, rebuild.stderr.read()
        assert rebuild.stdout.read().strip() == "rebuilt" and rebuild.stderr.read() == ""
        assert "v2" in subprocess.run(["modinfo", "-F", "description", str(ko)], capture_output=True, text=True).stdout
    finally:
        for proc in (session,):
            if proc.poll() is None:
                proc.kill()


def test_a_build_waits_while_another_process_is_building(tmp_path):
    release = "0.0.0-cctest-no-such-release"  # nothing to build: only the lock is exercised
    (tmp_path / "modules").mkdir()
    builder = kmod_process(tmp_path, "from cctest.base import filelock\n"
                                     f"lock = filelock.open_lock(kmod.BUILD_DIR / '{release}.lock')\n"
                                     "filelock.take(lock, exclusive=True); print('building', flush=True); "
                                     "sys.stdin.readline()")
    try:
        assert builder.stdout.readline().strip() == "building"
        waiter = kmod_process(tmp_path, f"print(kmod.build({release!r}))")
        assert waiter.stderr.readline().strip() == (
            f"waiting for another cctest (pid {builder.pid}) building the modules for {release}")
        assert not finished_within(waiter, 1)
        builder.stdin.write("\n")
        builder.stdin.flush()
        assert finished_within(waiter, 20) and waiter.returncode == 0
        assert waiter.stderr.read() == "" and waiter.stdout.read().strip() == "{}"
    finally:
        if builder.poll() is None:
            builder.kill()


def test_a_second_vm_session_into_one_out_directory_is_refused(tmp_path):
    try:
        vm.pick_kernel(None)
    except vm.VMError as error:
        pytest.skip(str(error))
    exp = tmp_path / "exp.yaml"
    exp.write_text("scenarios: {s: {link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}, duration_s: 5, "
                   "flows: [{cc: cubic}]}}\n")
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from cctest.run.session import out_dir_lock\n"
         f"with out_dir_lock(Path({str(out)!r})):\n    print('ready', flush=True); sys.stdin.readline()"],
        cwd=REPO, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out.mkdir()
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "cctest", "run", "s", "-f", str(exp), "--vm", "--out", str(out)],
                                cwd=REPO, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and time.monotonic() - started < 30
        assert result.stderr.strip().splitlines() == [
            f"error: --out {out}: another cctest --vm session (pid {holder.pid}) is writing there; wait for it to "
            "finish or choose another --out"]
        assert sorted(p.name for p in out.iterdir()) == [".cctest-vm.lock"]  # nothing else was made
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
