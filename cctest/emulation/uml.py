"""Boot cctest's User-Mode Linux kernel in time-travel mode and run a command in it.

The guest is the UML kernel running as an ordinary host process (no hypervisor). With
`time-travel=inf-cpu` its clock advances only through its timers: CPU work takes no guest time, so
a run's network behaves the same however slow or loaded the host is; a loaded host makes it take
longer, not come out different (docs/uml.md: identical bytes and retransmissions at 1.65x and
8.0x wall). The guest sees the host's root read-only over hostfs, and the checkout, the Python
environment and an empty output directory at fixed places, never a host path (cctest/emulation/umlshare.py);
it runs scripts/uml/init.sh as PID 1, which runs the command file and powers off.

Each instance is pinned to one host CPU (`taskset`): every guest syscall is a ptrace round trip
between the UML kernel process and the guest's process, and across CPUs each costs a wake-up
~6x dearer (unpinned runs were 4-6x slower).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import CctestError
from .umlkernel import SERIES, KernelBuild
from .umlshare import GUEST_SRC, Home

MEMORY_MB = 1536  # the guest's RAM, a sparse host file: Mininet, python3 and six iperf3 pairs fit
TIME_TRAVEL = "inf-cpu"
# A seeded guest's calendar starts here (2000-01-01T00:00:00Z), whatever the host's date: random.c
# mixes the calendar time into the generator at boot, and TCP's initial sequence numbers count it.
SEEDED_CALENDAR_START_S = 946_684_800
STOP_GRACE_S = 60.0  # an orderly teardown inside the guest (host seconds)


class UMLError(CctestError):
    pass


# What in a guest's kernel log means the kernel misbehaved (the engine's check and the VM tests' one).
DMESG_BAD = ("BUG:", "WARNING:", "Oops", "general protection fault", "Call Trace:", "refcount_t:",
             "list_add corruption", "UBSAN:", "KASAN:", "Kernel panic", "kernel panic")


def dmesg_problems(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(bad in line for bad in DMESG_BAD)]


def host_cpus() -> list[int]:
    """The host CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def cpu_for(index: int, cpus: list[int] | None = None) -> int:
    """Instance `index`'s CPU: distinct for as many instances as there are CPUs."""
    cpus = cpus or host_cpus()
    return cpus[index % len(cpus)]


def memory_dir(environ: dict[str, str] | None = None, mounts: str | None = None) -> Path:
    """Where the UML kernel process keeps its guest's memory, a sparse file of the guest's size that
    it maps executable: the first of $TMPDIR, $TMP, $TEMP that is set, else /dev/shm when it is a
    tmpfs, else /tmp (Linux 6.1 and 7.2, arch/um/os-Linux/mem.c). `mounts`: /proc/self/mounts' text."""
    env = os.environ if environ is None else environ
    for var in ("TMPDIR", "TMP", "TEMP"):
        if env.get(var):
            return Path(env[var])
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            mounts = ""
    shm_is_tmpfs = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts.splitlines())
    return Path("/dev/shm") if shm_is_tmpfs else Path("/tmp")


def host_problems(environ: dict[str, str] | None = None) -> list[str]:
    """What keeps this host (typically a container run with an engine's defaults) from booting a
    guest, each with its remedy; empty where nothing does. The UML kernel exits at once where its
    memory file cannot be mapped executable, and `setarch -R` fails where a seccomp profile refuses
    personality(ADDR_NO_RANDOMIZE), as docker's and podman's defaults do (docs/docker.md)."""
    problems = []
    where = memory_dir(environ)
    try:
        fs = os.statvfs(where)
    except OSError as err:
        problems.append(f"the UML kernel keeps each guest's memory in a file in {where}, which it cannot use ({err})")
    else:
        if fs.f_flag & os.ST_NOEXEC:
            problems.append(f"the UML kernel maps each guest's memory ({MEMORY_MB} MB, a sparse file) executable from "
                            f"{where}, which is mounted noexec here (a container's /dev/shm is): run the container "
                            f"with --tmpfs /dev/shm:rw,exec,size=<MB>m, at least {MEMORY_MB} MB per guest at once "
                            "(docs/docker.md), or set TMPDIR to a directory on a tmpfs mounted exec")
        elif fs.f_blocks * fs.f_frsize < MEMORY_MB * 2**20:
            problems.append(f"the UML kernel keeps each guest's memory ({MEMORY_MB} MB, a sparse file) in {where}, "
                            f"which holds only {fs.f_blocks * fs.f_frsize // 2**20} MB here: a guest that fills it "
                            f"dies; run the container with --tmpfs /dev/shm:rw,exec,size=<MB>m, at least "
                            f"{MEMORY_MB} MB per guest at once (docs/docker.md)")
    try:
        refused = subprocess.run(["setarch", "-R", "true"], capture_output=True, text=True)
    except OSError as err:
        problems.append(f"setarch (util-linux) cannot run: {err}")
    else:
        if refused.returncode != 0:
            problems.append("`setarch -R` (each guest boots without address-space randomisation: its memory layout, "
                            f"and with it a seeded run, would vary otherwise) failed: {refused.stderr.strip()}; a "
                            "container's default seccomp profile refuses personality(ADDR_NO_RANDOMIZE): run it with "
                            "a profile that allows it (docs/docker.md)")
    return problems


def kernel_command(build: KernelBuild, cpu: int, memory_mb: int = MEMORY_MB, seed: int | None = None,
                   userspace: str | None = None) -> list[str]:
    """The host command that boots one instance, run in its home (umlshare): pinned to `cpu`, the
    host's root read-only over hostfs (BLOCK=y: 6.1 mounts a hostfs root only through the block
    path), the console on the process's stdout (a file, start(); stdin is /dev/null: a terminal
    would be put in raw mode), the home's init.sh as PID 1, without the host's address-space
    randomisation (`setarch -R`): UML sizes and lays out the guest's physical memory from where the
    host put its heap (the "exec-shield gap"), which otherwise moved from boot to boot (1.86-2.00 GB,
    and hash-table sizes and TCP's memory limits with it). With `seed`, the guest's randomness comes
    from it instead of the host's entropy (`rng-seed=`, scripts/uml/patches/<series>/rng-seed.patch) and
    its calendar starts at a fixed date. `userspace`: how guest processes run, ptrace or seccomp
    (default: the series' own, umlkernel.Series). The kernel mixes every word of this line into its
    generator: they are the same words on every machine (docs/uml.md, "Determinism")."""
    series = SERIES[build.series]
    mode = series.boot_words(userspace or series.userspaces[0])
    seeded = [] if seed is None else [f"rng-seed={seed}", f"time-travel-start={SEEDED_CALENDAR_START_S * 10**9}"]
    return [
        "taskset", "-c", str(cpu), "setarch", "-R", str(build.binary),
        f"mem={memory_mb}M", f"time-travel={TIME_TRAVEL}", *mode, *seeded,
        "root=none", "hostfs=/", "rootfstype=hostfs", "rootflags=/", "ro",
        "con0=fd:0,fd:1", "con=null",
        "init=/proc/self/cwd/init.sh",
    ]


def command_file_text(guest_cmd: list[str], env: dict[str, str]) -> str:
    """What init.sh runs: cd to the checkout's fixed place, then exec the command with its
    environment (exec: the stop request's signal reaches cctest itself, not a shell)."""
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    return f"cd {GUEST_SRC} && exec env {assignments} {shlex.join(guest_cmd)}\n"


@dataclass
class Instance:
    """One booted UML guest. poll()/wait() give the guest command's exit code (from the file
    init.sh leaves in the home), not the UML process's. Once it has ended, what the guest wrote is
    in --out and its kernel log is out/.uml-dmesg-<index>.txt."""

    proc: subprocess.Popen
    home: Home
    index: int
    cpu: int
    log: Path
    started: float = field(default_factory=time.time)
    _pump: threading.Thread | None = None
    _code: int | None = None

    @property
    def stop_file(self) -> Path:
        return self.home.stop_file

    @property
    def dmesg_file(self) -> Path:
        return self.home.out / f".uml-dmesg-{self.index}.txt"

    @property
    def returncode(self) -> int | None:
        if self.proc.returncode is None:
            return None
        if self._code is None:
            if self._pump is not None:
                self._pump.join()
            try:
                self._code = int(self.home.exit_file.read_text().strip())
            except (OSError, ValueError):
                # The guest never got to write it (a crash, a kill): never report success.
                code = self.proc.returncode
                self._code = 128 - code if code < 0 else (code or 1)
            self.cleanup()
        return self._code

    def dmesg_problems(self) -> list[str] | None:
        """The guest kernel log's bad lines, or None when the guest left no log."""
        try:
            return dmesg_problems(self.dmesg_file.read_text(errors="replace"))
        except OSError:
            return None

    def cleanup(self) -> None:
        """Once the instance has ended: what it wrote moved into --out and its kernel log beside it.
        The home keeps its manifest until the session has read it (Places.release)."""
        self.home.collect()
        self.dmesg_file.unlink(missing_ok=True)
        if self.home.dmesg.exists():
            self.home.dmesg.replace(self.dmesg_file)
        self.home.console.unlink(missing_ok=True)

    def poll(self) -> int | None:
        self.proc.poll()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.proc.wait(timeout=timeout)
        code = self.returncode
        assert code is not None  # the process has ended
        return code

    def request_stop(self) -> None:
        """Ask the guest for an orderly stop: its cctest tears down and writes what it measured."""
        if self.proc.poll() is None:
            self.stop_file.touch()

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """request_stop(), then end the UML process if it does not power off in time; what the
        guest wrote is collected either way."""
        if self.proc.poll() is None:
            self.request_stop()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        _ = self.returncode


def start(build: KernelBuild, guest_cmd: list[str], home: Home, env: dict[str, str], index: int = 0,
          cpu: int | None = None, log: Path | None = None, echo: bool = False, seed: int | None = None,
          userspace: str | None = None) -> Instance:
    """Boot one instance in its prepared home (umlshare.prepare) that runs guest_cmd, written in the
    guest's own paths, with `env`, and powers off. Its console goes to `log` (default
    out/.vm-<index>.log), and with `echo` to this terminal too. `seed`, `userspace`: kernel_command."""
    cpu = cpu_for(index) if cpu is None else cpu
    log = log or home.out / f".vm-{index}.log"
    home.command.write_text(command_file_text(guest_cmd, env))
    cmd = kernel_command(build, cpu, seed=seed, userspace=userspace)
    # The console goes to a regular file, not a pipe: the kernel cannot ask for SIGIO on a file, so
    # it takes no console-write interrupt. On a pipe it took one whenever our reader drained it, at
    # a moment only the host's scheduling decided, and an interrupt's time and address go into the
    # guest's random number generator: seeded boots then drew one of two streams by chance.
    # Its own session: a Ctrl-C on our terminal is ours to hand on (as a stop request), since a
    # SIGINT would end the UML process at once, with the guest's unwritten pages.
    with open(home.console, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=home.path, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    instance = Instance(proc, home, index, cpu, log)
    instance._pump = threading.Thread(target=_pump, args=(proc, home.console, log, echo), daemon=True)
    instance._pump.start()
    return instance


PUMP_POLL_S = 0.05


def _pump(proc: subprocess.Popen, console: Path, log: Path, echo: bool) -> None:
    """Follow the console file into the log (and the terminal), line by line as it grows, until the
    guest has ended. Each logged line starts with the host seconds since boot, `[   12.345] ` (to
    PUMP_POLL_S): the guest reads the host's clock through hostfs only to the second (hostfs passes
    no nanoseconds), so bench/engines.py times phases by the console lines that announce them."""
    started = time.monotonic()
    pending = b""
    with open(console, "rb") as source, open(log, "wb") as sink:
        while True:
            ended = proc.poll() is not None  # read once more after the end: what it wrote last
            pending += source.read()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                sink.write(f"[{time.monotonic() - started:9.3f}] ".encode() + line + b"\n")
                if echo:
                    sys.stdout.buffer.write(line + b"\n")
            sink.flush()
            if echo:
                sys.stdout.flush()
            if ended:
                break
            time.sleep(PUMP_POLL_S)
        if pending:
            sink.write(f"[{time.monotonic() - started:9.3f}] ".encode() + pending + b"\n")


_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\] (.*)$")


def console_phases(log_text: str) -> list[dict[str, float]]:
    """Per run in a console log (runs start at a rule line naming the repetition), the host second
    at which each phase line (`  <phase>`, as the runner prints them in a VM) appeared."""
    runs: list[dict[str, float]] = []
    for line in log_text.splitlines():
        match = _STAMP.match(line)
        if match is None:
            continue
        at, text = float(match[1]), match[2]
        if "repetition" in text and "─" in text:
            runs.append({})
        elif runs and text.startswith("  ") and not text.startswith("   ") and text.strip():
            runs[-1].setdefault(text.strip(), at)
    return runs
