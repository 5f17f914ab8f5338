"""One cgroup (v2) per `cctest run` session, killed as a whole when the session ends.

cctest moves itself into the cgroup before it starts anything, so every process it starts, however
indirectly (Mininet's host shells, iperf3, tcpdump, bpftrace, ss, ping), is born inside. Teardown,
or `cctest clean` after a SIGKILL, kills the cgroup and so also what was started but never
journaled (killed between spawn and journal write) or what escaped its parent. The journal names
the cgroup's path before it is made.

Without a writable cgroup v2 hierarchy the session runs without one (a notice says so; `cctest
doctor` too): the journal's per-process entries are then the only record of what was started.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

from ..base.errors import CctestError

PREFIX = "cctest-run-"
MOUNTINFO = Path("/proc/self/mountinfo")
KILL_TIMEOUT_S = 10.0  # a killed process leaves its cgroup at exit; exits in a loaded guest take time


class CgroupError(CctestError):
    pass


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
    hybrid host), or None."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        # mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPEROPTIONS
        before, _, after = line.partition(" - ")
        if after.split()[:1] == ["cgroup2"]:
            return Path(before.split()[4])
    return None


def own_cgroup(pid: int | str = "self") -> Path | None:
    """The cgroup v2 directory that holds `pid`, or None (no v2 hierarchy)."""
    mount = cgroup2_mount()
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    if mount is None or relative is None:
        return None
    return mount / relative.lstrip("/")


def unavailable_reason() -> str | None:
    """Why a run cannot have its cgroup here, or None if it can."""
    mount = cgroup2_mount()
    if mount is None:
        return "cgroup v2 is not mounted"
    home = own_cgroup()
    if home is None or not home.is_dir():
        return f"this process's cgroup is not under {mount}"
    if not os.access(home, os.W_OK):
        return f"{home} is not writable (needs root; read-only in some containers)"
    return None


def has_run_cgroup_name(path: Path) -> bool:
    """Whether `path` is named as the cgroups this module makes (a journal naming any other is refused)."""
    return path.is_absolute() and ".." not in path.parts and re.fullmatch(rf"{PREFIX}\d+", path.name) is not None


def is_run_cgroup(path: Path) -> bool:
    """Whether `path` is a cgroup this module makes: the only kind `clean` may kill."""
    mount = cgroup2_mount()
    return mount is not None and has_run_cgroup_name(path) and path.is_relative_to(mount)


def procs(path: Path) -> list[int]:
    """The processes in the cgroup and in any below it."""
    found: list[int] = []
    for sub, _, _ in os.walk(path):
        try:
            found += [int(pid) for pid in (Path(sub) / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pass  # removed meanwhile
    return found


# Processes that write what they measured only when they exit (iperf3 -J): asked to end with SIGTERM
# first, and given this long, so a cgroup kill keeps their results.
TERM_FIRST = ("iperf3",)
TERM_GRACE_S = 5.0


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def terminate_first(path: Path, names: tuple[str, ...] = TERM_FIRST, grace_s: float = TERM_GRACE_S) -> int:
    """SIGTERM the cgroup's processes running one of `names` and wait (at most grace_s) for them to
    end. Returns how many were asked."""
    asked = [pid for pid in procs(path) if _command(pid) in names]
    for pid in asked:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while asked and time.monotonic() < deadline and any(pid in procs(path) for pid in asked):
        time.sleep(0.05)
    return len(asked)


def kill(path: Path, timeout_s: float = KILL_TIMEOUT_S, atomic: bool = True) -> int:
    """SIGKILL everything in the cgroup and wait until it is empty. Returns how many processes were in
    it. cgroup.kill (Linux >= 5.14) kills atomically, forks included; without it (or `atomic` False)
    each PID in cgroup.procs is killed, again until none is left (a fork may race the first pass)."""
    count = len(procs(path))
    terminate_first(path)  # iperf3 writes its results on SIGTERM; SIGKILL would leave 0 bytes
    deadline = time.monotonic() + timeout_s
    kill_file = path / "cgroup.kill"
    atomic = atomic and kill_file.exists()
    if atomic:
        kill_file.write_text("1\n")
    while True:
        left = procs(path)
        if not left:
            return count
        if time.monotonic() > deadline:
            raise CgroupError(f"{len(left)} process(es) still in {path} {timeout_s:g} s after SIGKILL: {left[:5]}")
        if not atomic:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)


def remove(path: Path) -> None:
    """rmdir the cgroup and any below it (deepest first): a cgroup is removed by rmdir once empty."""
    for sub, _, _ in sorted(os.walk(path), key=lambda entry: -len(Path(entry[0]).parts)):
        os.rmdir(sub)


def kill_and_remove(path: Path) -> int | None:
    """Returns how many processes were killed (None: no such cgroup); CgroupError/OSError if the
    cgroup is still there afterwards."""
    if not path.exists():
        return None
    if not is_run_cgroup(path):
        raise CgroupError(f"{path} is not a cctest cgroup in the cgroup v2 hierarchy; left alone")
    count = kill(path)
    remove(path)
    return count


class RunCgroup:
    """The session's cgroup, with this process inside until close()."""

    def __init__(self, path: Path, home: Path):
        self.path = path
        self.home = home

    @classmethod
    def enter(cls, before_mkdir: Callable[[Path], None] | None = None) -> RunCgroup:
        """Make the cgroup and move this process into it. `before_mkdir(path)` journals it first, so a
        SIGKILL right after mkdir still leaves it named. CgroupError if not possible here."""
        reason = unavailable_reason()
        if reason:
            raise CgroupError(reason)
        home = own_cgroup()
        if home is None:  # gone since unavailable_reason() looked
            raise CgroupError("this process's cgroup is no longer found")
        path = home / f"{PREFIX}{os.getpid()}"
        if before_mkdir is not None:
            before_mkdir(path)
        try:
            path.mkdir()
            (path / "cgroup.procs").write_text(f"{os.getpid()}\n")
        except OSError as error:
            try:
                path.rmdir()
            except OSError:
                pass
            raise CgroupError(f"cannot make or join {path}: {error.strerror or error}") from None
        return cls(path, home)

    def close(self) -> int:
        """Leave the cgroup, kill whatever is still in it and remove it. Returns how many processes
        were still in it (each a leak of some teardown step). CgroupError/OSError if it stays."""
        (self.home / "cgroup.procs").write_text(f"{os.getpid()}\n")
        return kill_and_remove(self.path) or 0
