"""Boot cctest's User-Mode Linux kernel in time-travel mode and run a command in it.

The guest is the UML kernel running as an ordinary host process (no hypervisor). With
`time-travel=inf-cpu` its clock advances only through its timers: CPU work takes no guest time, so
a run's network behaves the same however slow or loaded the host is; a loaded host makes it take
longer, not come out different (docs/uml.md: identical bytes and retransmissions at 1.65x and
8.0x wall). The guest sees the host's root read-only over hostfs
(the same venv and checkout), the output directory read-write at the same path, and runs
scripts/uml/init.sh as PID 1, which runs the command file and powers off.

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

from .errors import CctestError
from .umlkernel import REPO_ROOT, KernelBuild

INIT = REPO_ROOT / "scripts" / "uml" / "init.sh"
MEMORY_MB = 1536  # the guest's RAM, a sparse host file: Mininet, python3 and six iperf3 pairs fit
TIME_TRAVEL = "inf-cpu"
# A seeded guest's calendar starts here (2000-01-01T00:00:00Z), whatever the host's date: random.c
# mixes the calendar time into the generator at boot, and TCP's initial sequence numbers count it.
SEEDED_CALENDAR_START_S = 946_684_800
STOP_GRACE_S = 60.0  # an orderly teardown inside the guest (host seconds)
# A kernel command-line word the host's init passes on as an environment variable must not hold
# spaces or quotes; everything else travels in the command file.
_SAFE_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%")


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


def _checked_word(name: str, value: str) -> str:
    if not value or not set(value) <= _SAFE_WORD:
        raise UMLError(f"{name} {value!r}: a UML guest gets it on the kernel command line, which allows "
                       "no spaces, quotes or commas; choose a path of letters, digits and / . _ - + : @ %")
    return value


def kernel_command(build: KernelBuild, out: Path, command_file: Path, index: int, cpu: int,
                   memory_mb: int = MEMORY_MB, seed: int | None = None) -> list[str]:
    """The host command that boots one instance: pinned to `cpu`, the host's root read-only over
    hostfs (BLOCK=y: 6.1 mounts a hostfs root only through the block path), the console on the
    process's stdout (a file, start(); stdin is /dev/null: a terminal would be put in raw mode),
    init.sh as PID 1, without the host's address-space randomisation (`setarch -R`): UML sizes and
    lays out the guest's physical memory from where the host put its heap (the "exec-shield gap"),
    which otherwise moved from boot to boot (1.86-2.00 GB, and hash-table sizes and TCP's memory
    limits with it). With `seed`, the guest's randomness comes from it instead of the host's
    entropy (`rng-seed=`, scripts/uml/patches/rng-seed.patch) and its calendar starts at a fixed
    date: the kernel mixes every word of this line into its generator, so a run repeats given the
    same seed and words (docs/uml.md, "Determinism")."""
    seeded = [] if seed is None else [f"rng-seed={seed}", f"time-travel-start={SEEDED_CALENDAR_START_S * 10**9}"]
    return [
        "taskset", "-c", str(cpu), "setarch", "-R", str(build.binary),
        f"mem={memory_mb}M", f"time-travel={TIME_TRAVEL}", *seeded,
        "root=none", "hostfs=/", "rootfstype=hostfs", "rootflags=/", "ro",
        "con0=fd:0,fd:1", "con=null",
        f"init={INIT}",
        f"CCTEST_UML_OUT={_checked_word('--out', str(out))}",
        f"CCTEST_UML_COMMAND={_checked_word('the command file', str(command_file))}",
        f"CCTEST_UML_ID={index}",
    ]


def command_file_text(guest_cmd: list[str], env: dict[str, str]) -> str:
    """What init.sh runs: cd to the checkout, then exec the command with its environment (exec:
    the stop request's signal reaches cctest itself, not a shell)."""
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    return f"cd {shlex.quote(str(REPO_ROOT))} && exec env {assignments} {shlex.join(guest_cmd)}\n"


@dataclass
class Instance:
    """One booted UML guest. poll()/wait() give the guest command's exit code (from the file
    init.sh leaves on the share), not the UML process's."""

    proc: subprocess.Popen
    out: Path
    index: int
    cpu: int
    log: Path
    command_file: Path | None = None
    started: float = field(default_factory=time.time)
    _pump: threading.Thread | None = None
    _code: int | None = None

    @property
    def exit_file(self) -> Path:
        return self.out / f".uml-exit-{self.index}"

    @property
    def stop_file(self) -> Path:
        return self.out / f".uml-stop-{self.index}"

    @property
    def console_file(self) -> Path:
        return console_file(self.out, self.index)

    @property
    def dmesg_file(self) -> Path:
        return self.out / f".uml-dmesg-{self.index}.txt"

    @property
    def returncode(self) -> int | None:
        if self.proc.returncode is None:
            return None
        if self._code is None:
            if self._pump is not None:
                self._pump.join()
            try:
                self._code = int(self.exit_file.read_text().strip())
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
        """Remove the instance's files on the share once it has ended (its dmesg stays: the guest's
        kernel log, for whoever checks it)."""
        for path in (self.exit_file, self.stop_file, self.command_file, self.console_file):
            if path is not None:
                path.unlink(missing_ok=True)

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
        """request_stop(), then end the UML process if it does not power off in time."""
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
        self.stop_file.unlink(missing_ok=True)


def start(build: KernelBuild, guest_cmd: list[str], out: Path, env: dict[str, str], index: int = 0,
          cpu: int | None = None, log: Path | None = None, echo: bool = False, seed: int | None = None) -> Instance:
    """Boot one instance that runs guest_cmd with `env` and powers off. Its console goes to `log`
    (default out/.vm-<index>.log), and with `echo` to this terminal too. `seed`: kernel_command."""
    out = out.resolve()
    cpu = cpu_for(index) if cpu is None else cpu
    log = log or out / f".vm-{index}.log"
    for stale in (out / f".uml-exit-{index}", out / f".uml-stop-{index}", out / f".uml-dmesg-{index}.txt"):
        stale.unlink(missing_ok=True)
    # Named by the instance alone (one session per --out: session.out_dir_lock), not by our pid:
    # its path is a word of the kernel command line, which seeds the guest's generator.
    command_file = out / f".guest-command-uml-{index}.sh"
    command_file.write_text(command_file_text(guest_cmd, env))
    cmd = kernel_command(build, out, command_file, index, cpu, seed=seed)
    # The console goes to a regular file, not a pipe: the kernel cannot ask for SIGIO on a file, so
    # it takes no console-write interrupt. On a pipe it took one whenever our reader drained it, at
    # a moment only the host's scheduling decided, and an interrupt's time and address go into the
    # guest's random number generator: seeded boots then drew one of two streams by chance.
    console = console_file(out, index)
    # Its own session: a Ctrl-C on our terminal is ours to hand on (as a stop request), since a
    # SIGINT would end the UML process at once, with the guest's unwritten pages.
    with open(console, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    instance = Instance(proc, out, index, cpu, log, command_file)
    instance._pump = threading.Thread(target=_pump, args=(proc, console, log, echo), daemon=True)
    instance._pump.start()
    return instance


def console_file(out: Path, index: int) -> Path:
    return out / f".uml-console-{index}.raw"


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
