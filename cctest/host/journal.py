"""One active run per machine, and a journal of everything it created.

The lock (flock) refuses a second concurrent `cctest run`, and `cctest clean` while a run is
active. The journal is written *before* each side effect, so that `cctest clean` can undo a run
that was killed with SIGKILL: it names the processes started (with their start time, so that a
PID the kernel has since given to another process is never killed), the links and host shells
of the topology, the modules loaded (with where the kernel placed them, so that a module the
user loaded again after the crash is left alone), the sysctls changed (with their old values), the
run's cgroup (cgroup.py: killing it ends every process the run started, journaled or not), a
tracefs mount cctest made and its tracefs instances (which outlive the run and any unmount, and
keep tracing until removed). run/cleanup.py replays it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any, TextIO

from ..base import atomic
from ..base.errors import BadInput
from . import cgroup, tracefs

# Where the lock and the journal live: root's /run/cctest. CCTEST_STATE_DIR moves it (for tests,
# or an unprivileged user's runs); either way the directory must belong to the user running cctest
# and be writable by no one else, or root's `clean` would replay whatever another user wrote.
DEFAULT_STATE_DIR = Path("/run/cctest")
STATE_DIR = Path(os.environ.get("CCTEST_STATE_DIR") or DEFAULT_STATE_DIR)
SYS_MODULE = Path("/sys/module")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class RunLockedError(BadInput):
    pass


class JournalError(BadInput):
    """active.json is not a journal this code wrote: a one-line reason (exit 2)."""


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the
    PID it names one process for the life of the system, unlike the PID alone, which is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # comm (field 2) may hold spaces and parentheses: the fields after it start at the last ')'.
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 overall; fields[0] is field 3
    except (IndexError, ValueError):
        return None


def process_command(pid: int) -> str | None:
    """The program a process runs now (argv[0]'s base name), or None."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return None
    return os.path.basename(argv0.decode(errors="replace")) or None


def process_cgroup(pid: int) -> str | None:
    """The process's cgroup v2 path ("0::/..." in /proc/PID/cgroup), or None."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def is_same_process(pid: int, start_time: int | None) -> bool:
    """Whether `pid` is still the process that was journaled (never init or the kernel's pid 0)."""
    return pid > 1 and start_time is not None and process_start_time(pid) == start_time


def module_identity(name: str, sys_module: Path = SYS_MODULE) -> str | None:
    """Where the kernel placed the module's code: a reload puts it elsewhere. None if unreadable
    (not loaded, or not root: the addresses read as zero)."""
    try:
        text = (sys_module / name / "sections" / ".text").read_text().strip()
    except OSError:
        return None
    return text if text and int(text, 16) != 0 else None


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


class UntrustedStateDir(BadInput):
    """The state directory (or a file in it) could have been written by someone else: one line, exit 2."""


def _trust_problem(info: os.stat_result, kind: str) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return f"a symbolic link, not a {kind}"
    if kind == "directory" and not stat.S_ISDIR(info.st_mode) or kind == "file" and not stat.S_ISREG(info.st_mode):
        return f"not a {kind}"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by the user running cctest (uid {os.geteuid()})"
    if info.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _parent_problem(state_dir: Path) -> tuple[Path, str] | None:
    """An ancestor through which another user could replace the state directory: one owned by
    another user (root aside), or writable by others without the sticky bit (as /tmp has)."""
    for parent in state_dir.resolve().parents:
        info = os.stat(parent)
        if info.st_uid not in (0, os.geteuid()):
            return parent, f"owned by uid {info.st_uid}"
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return parent, f"writable by others without the sticky bit (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def check_state_dir(state_dir: Path) -> None:
    """Make the state directory (mode 0700) or check one that exists: it, and the journal and lock
    in it, belong to this user and are writable by no one else (CCTEST_STATE_DIR names another)."""
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(state_dir)
    except OSError as error:
        raise UntrustedStateDir(f"{state_dir}: cannot use as cctest's state directory ({error.strerror})") from None
    problem = _trust_problem(info, "directory")
    parent = _parent_problem(state_dir) if problem is None else None
    if parent is not None:
        state_dir, problem = parent[0], f"a parent of the state directory, {parent[1]}"
    if problem is None:
        for name in ("active.json", "lock"):
            try:
                problem = _trust_problem(os.lstat(state_dir / name), "file")
            except FileNotFoundError:
                continue
            if problem:
                state_dir = state_dir / name
                break
    if problem:
        raise UntrustedStateDir(f"{state_dir}: {problem}; cctest's state (CCTEST_STATE_DIR, default "
                                f"{DEFAULT_STATE_DIR}) must be its user's alone; inspect it, then fix or delete it")


def take_lock(state_dir: Path) -> TextIO | None:
    """The run lock, taken without waiting. Returns the open file, or None if another holds it."""
    check_state_dir(state_dir)
    lock_file = open(state_dir / "lock", "a+")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        return None
    return lock_file


def lock_holder(state_dir: Path) -> str:
    try:
        pid = (state_dir / "lock").read_text().strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"


def unlock(lock_file: TextIO) -> None:
    fcntl.flock(lock_file, fcntl.LOCK_UN)
    lock_file.close()


class Journal:
    def __init__(self, state_dir: Path = STATE_DIR):
        self.dir = state_dir
        self.path = state_dir / "active.json"
        self._lock_file: TextIO | None = None
        self.data: dict = {"pid": os.getpid(), "boot_id": boot_id(), "processes": [], "modules": [],
                           "links": [], "hosts": [], "sysctls": {},
                           "cgroup": None, "mounts": [], "tracefs_instances": []}

    def acquire(self, description: str) -> None:
        self._lock_file = take_lock(self.dir)
        if self._lock_file is None:
            raise RunLockedError(f"a run is active ({lock_holder(self.dir)}); wait for it to finish") from None
        # Who holds the lock, for a refused `run` or `clean` to name.
        self._lock_file.seek(0)
        self._lock_file.truncate()
        self._lock_file.write(f"{os.getpid()}\n")
        self._lock_file.flush()
        if self.path.exists():
            self.release()
            raise RunLockedError(
                "a previous cctest run was killed and left state behind; run `cctest clean` first"
            )
        self.data["description"] = description
        self._write()

    def _write(self) -> None:
        write_journal(self.path, self.data)

    def add_process(self, pid: int, what: str) -> None:
        # Entries of processes that have ended go: a long sweep's journal stays the size of one run,
        # and a PID the kernel reuses is never named.
        self.data["processes"] = [p for p in self.data["processes"] if is_same_process(p["pid"], p["start"])]
        self.data["processes"].append({"pid": pid, "what": what, "start": process_start_time(pid),
                                       "command": process_command(pid)})
        self._write()

    def add_module(self, name: str) -> None:
        """Before insmod: the module may be loaded from here on."""
        self.data["modules"].append({"name": name, "identity": None})
        self._write()

    def module_loaded(self, name: str) -> None:
        """After insmod: record where it sits, so that `clean` unloads this load and no later one."""
        for entry in self.data["modules"]:
            if entry["name"] == name and entry["identity"] is None:
                entry["identity"] = module_identity(name)
        self._write()

    def module_unloaded(self, name: str) -> None:
        self.data["modules"] = [m for m in self.data["modules"] if m["name"] != name]
        self._write()

    def add_topology(self, hosts: list[str], links: list[str]) -> None:
        """Before Mininet builds them: the host shells' names and every interface name."""
        self.data["hosts"] = sorted(set(self.data["hosts"]) | set(hosts))
        self.data["links"] = sorted(set(self.data["links"]) | set(links))
        self._write()

    def set_cgroup(self, path: Path | None) -> None:
        """Before mkdir (cgroup.RunCgroup.enter), and None once it is removed."""
        self.data["cgroup"] = None if path is None else str(path)
        self._write()

    def add_mount(self, path: str) -> None:
        """Before mount: cctest made this mount, so teardown and `clean` unmount it."""
        self.data["mounts"] = sorted(set(self.data["mounts"]) | {path})
        self._write()

    def mount_removed(self, path: str) -> None:
        self.data["mounts"] = [m for m in self.data["mounts"] if m != path]
        self._write()

    def add_tracefs_instance(self, name: str) -> None:
        """Before mkdir: the run's own tracefs instance, which `clean` removes if the run cannot."""
        self.data["tracefs_instances"] = sorted(set(self.data["tracefs_instances"]) | {name})
        self._write()

    def tracefs_instance_removed(self, name: str) -> None:
        self.data["tracefs_instances"] = [n for n in self.data["tracefs_instances"] if n != name]
        self._write()

    def add_sysctl(self, key: str, old: str) -> None:
        """Before a root-namespace sysctl is written: its value to restore (the first one seen)."""
        self.data["sysctls"].setdefault(key, old)
        self._write()

    def sysctl_restored(self, key: str) -> None:
        self.data["sysctls"].pop(key, None)
        self._write()

    def finish(self) -> None:
        """Everything was undone: forget it and let the next run in."""
        self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        if self._lock_file is not None:
            unlock(self._lock_file)
            self._lock_file = None


def write_journal(path: Path, data: dict) -> None:
    """Whole or not at all: a SIGKILL mid-write leaves the journal before it, never half of one."""
    atomic.write_text(path, json.dumps(data, indent=1))


def read_journal(path: Path) -> dict:
    """The journal at `path` ({} if there is none); JournalError if it is not one this code wrote."""
    check_state_dir(path.parent)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise JournalError(f"{path}: unreadable ({error}); inspect it, then delete it") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise JournalError(f"{path}: not JSON ({error}); inspect it, then delete it") from None
    problem = _shape_problem(data)
    if problem:
        raise JournalError(f"{path}: not a cctest journal ({problem}); inspect it, then delete it")
    return data


def _shape_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"a JSON object expected, got {type(data).__name__}"
    processes = data.get("processes", [])
    if not isinstance(processes, list) or not all(
            isinstance(p, dict) and type(p.get("pid")) is int and type(p.get("start", 0)) in (int, type(None))
            for p in processes):
        return "processes must be a list of {pid: integer, what, start}"
    modules = data.get("modules", [])
    if not isinstance(modules, list) or not all(
            isinstance(m, str) or (isinstance(m, dict) and isinstance(m.get("name"), str)) for m in modules):
        return "modules must be a list of {name, identity}"
    for key in ("links", "hosts"):
        if not isinstance(data.get(key, []), list) or not all(isinstance(n, str) for n in data.get(key, [])):
            return f"{key} must be a list of names"
    sysctls = data.get("sysctls", {})
    if not isinstance(sysctls, dict) or not all(isinstance(v, str) for v in sysctls.values()):
        return "sysctls must map names to their old values"
    group = data.get("cgroup")
    # Killing a cgroup kills everything in it: only one this code makes, never e.g. system.slice.
    if group is not None and not (isinstance(group, str) and cgroup.has_run_cgroup_name(Path(group))):
        return f"cgroup must be a {cgroup.PREFIX}PID directory in the cgroup v2 hierarchy"
    mounts = data.get("mounts", [])
    if not isinstance(mounts, list) or not all(m in (str(p) for p in tracefs.CANDIDATES) for m in mounts):
        return "mounts must list tracefs mountpoints"
    instances = data.get("tracefs_instances", [])
    if not isinstance(instances, list) or not all(isinstance(n, str) and tracefs.is_instance_name(n)
                                                  for n in instances):
        return f"tracefs_instances must list {tracefs.INSTANCE_PREFIX}PID-N names"
    return None
