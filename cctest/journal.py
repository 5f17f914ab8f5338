"""One active run per machine, and a journal of everything it created.

The lock (flock) refuses a second concurrent `cctest run`, and `cctest clean` while a run is
active. The journal is written *before* each side effect, so that `cctest clean` can undo a run
that was killed with SIGKILL: it names the processes started (with their start time, so that a
PID the kernel has since given to another process is never killed), the links and host shells
of the topology, the modules loaded (with where the kernel placed them, so that a module the
user loaded again after the crash is left alone), the sysctls changed (with their old values), the
run's cgroup (cgroup.py: killing it ends every process the run started, journaled or not) and a
tracefs mount cctest made.
`clean` touches only what the journal names; name patterns are used only with --force.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import subprocess
from pathlib import Path

from . import cgroup, kmod, tracefs
from .doctor import DOCTOR_NS_PREFIX
from .dumbbell import NODE_PREFIX
from .errors import BadInput

# Where the lock and the journal live: root's /run/cctest. CCTEST_STATE_DIR moves it (for tests,
# or an unprivileged user's runs); either way the directory must belong to the user running cctest
# and be writable by no one else, or root's `clean` would replay whatever another user wrote.
DEFAULT_STATE_DIR = Path("/run/cctest")
STATE_DIR = Path(os.environ.get("CCTEST_STATE_DIR") or DEFAULT_STATE_DIR)
SYS_MODULE = Path("/sys/module")
# What cctest itself could have written, and so all `clean` replays: names with its prefixes,
# its own modules, the commands it starts; no sysctl (every one it sets lives in a namespace that
# dies with the run).
LINK_NAME = re.compile(rf"{NODE_PREFIX}(s\d+|snd\d+|rcv\d+)(-\w+)?")
HOST_NAME = re.compile(rf"{NODE_PREFIX}(s|snd|rcv)\d+")
ROOT_SYSCTLS: tuple[str, ...] = ()
COMMANDS = ("iperf3", "sh", "tc", "tcpdump", "bpftrace", "bash", "mnexec")
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


def check_state_dir(state_dir: Path) -> None:
    """Make the state directory (mode 0700) or check one that exists: it, and the journal and lock
    in it, belong to this user and are writable by no one else (CCTEST_STATE_DIR names another)."""
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(state_dir)
    except OSError as error:
        raise UntrustedStateDir(f"{state_dir}: cannot use as cctest's state directory ({error.strerror})") from None
    problem = _trust_problem(info, "directory")
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


def _lock(state_dir: Path):
    """The run lock, taken without waiting. Returns the open file, or None if another holds it."""
    check_state_dir(state_dir)
    lock_file = open(state_dir / "lock", "a+")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        return None
    return lock_file


def _lock_holder(state_dir: Path) -> str:
    try:
        pid = (state_dir / "lock").read_text().strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"


def _unlock(lock_file) -> None:
    fcntl.flock(lock_file, fcntl.LOCK_UN)
    lock_file.close()


class Journal:
    def __init__(self, state_dir: Path = STATE_DIR):
        self.dir = state_dir
        self.path = state_dir / "active.json"
        self._lock_file = None
        self.data: dict = {"pid": os.getpid(), "boot_id": boot_id(), "processes": [], "modules": [],
                           "links": [], "hosts": [], "sysctls": {},
                           "cgroup": None, "mounts": []}

    def acquire(self, description: str) -> None:
        self._lock_file = _lock(self.dir)
        if self._lock_file is None:
            raise RunLockedError(f"a run is active ({_lock_holder(self.dir)}); wait for it to finish") from None
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
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)

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

    def finish(self) -> None:
        """Everything was undone: forget it and let the next run in."""
        self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        if self._lock_file is not None:
            _unlock(self._lock_file)
            self._lock_file = None


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


def _shape_problem(data) -> str | None:
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
    return None


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def root_links() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    return re.findall(r"^\d+:\s+([^:@\s]+)", out, flags=re.M)


def pattern_links() -> list[str]:
    """--force only: interfaces that look like a cctest run's (ccs1-btl, ccs2-rcv0, ...)."""
    return [n for n in root_links() if re.fullmatch(rf"{NODE_PREFIX}(s\d+|snd\d+|rcv\d+)(-\w+)?", n)]


def host_shells(names: list[str] | None) -> list[int]:
    """Mininet host shells (each holds a network namespace open): of the journaled host names, or,
    with names None (--force), of any cctest-looking name."""
    if names is not None and not names:
        return []
    # pgrep takes POSIX extended regular expressions: [0-9], not \d (which never matches there).
    pattern = "|".join(re.escape(n) for n in names) if names is not None else rf"{NODE_PREFIX}(snd|rcv|s)[0-9]+"
    out = _run(["pgrep", "-f", rf"mininet:({pattern})( |$)"]).stdout
    return [int(pid) for pid in out.split() if int(pid) > 1]


def doctor_namespaces() -> list[str]:
    """--force only: the probe namespaces of a `cctest doctor` (or a run's probe) that was killed."""
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(DOCTOR_NS_PREFIX)]


OWN_MODULES = kmod.PROJECT_CCS + tuple(f"tcp_{cc}" for cc in kmod.KERNEL_CCS)


class CleanRefused(BadInput):
    """`clean` would risk harm (a run is active): a one-line reason (exit 2)."""


def clean(state_dir: Path = STATE_DIR, force: bool = False, sys_module: Path = SYS_MODULE) -> list[str]:
    """Undo whatever a killed run left behind. Returns a line per action taken or refused.

    Only what the journal names is touched, unless `force`. The journal is kept, naming what is
    still to undo, when something could not be undone."""
    lock_file = _lock(state_dir)
    if lock_file is None and not force:
        raise CleanRefused(f"a run is active ({_lock_holder(state_dir)}); let it finish, or use --force")
    try:
        return _clean(state_dir, force, sys_module)
    finally:
        if lock_file is not None:
            _unlock(lock_file)


def _clean(state_dir: Path, force: bool, sys_module: Path) -> list[str]:
    actions: list[str] = []
    journal_path = state_dir / "active.json"
    data = read_journal(journal_path)
    if not data and not force:
        return []
    same_boot = data.get("boot_id") in (None, boot_id())
    remaining: dict = {"processes": [], "modules": [], "links": [], "hosts": data.get("hosts", []), "sysctls": {},
                       "cgroup": None, "mounts": []}
    group = data.get("cgroup") if same_boot else None
    if group:
        # First: whatever the run started, journaled or not, dies with it.
        try:
            killed = cgroup.kill_and_remove(Path(group))
            if killed is not None:
                actions.append(f"killed {killed} process(es) in the run's cgroup and removed {group}")
        except (cgroup.CgroupError, OSError) as error:
            actions.append(f"could not remove cgroup {group}: {error}")
            remaining["cgroup"] = group
    refused: dict = {"processes": [], "modules": [], "links": [], "hosts": [], "sysctls": {}}

    def refuse(key: str, entry, line: str) -> None:
        actions.append(f"refused {line}")
        if isinstance(refused[key], dict):
            refused[key].update(entry)
        else:
            refused[key].append(entry)

    for proc in data.get("processes", []) if same_boot else []:
        pid, what = proc["pid"], proc.get("what", "process")
        if not is_same_process(pid, proc.get("start")):
            continue  # ended (and perhaps its PID given to another process): nothing of ours to kill
        problem = _process_problem(pid, group)
        if problem:
            refuse("processes", proc, f"to kill pid {pid} ({what}): {problem}")
            continue
        try:
            os.kill(pid, 9)
            actions.append(f"killed {what} (pid {pid})")
        except ProcessLookupError:
            pass
        except PermissionError:
            actions.append(f"could not kill {what} (pid {pid}): permission denied")
            remaining["processes"].append(proc)
    for host in data.get("hosts", []):
        if not HOST_NAME.fullmatch(host):
            refuse("hosts", host, f"host {host}: not a name cctest gives its hosts ({HOST_NAME.pattern})")
    # Host shells named in the journal were killed above by identity (they are journaled processes,
    # and in the run's cgroup); matching names machine-wide is for --force only.
    shells = host_shells(None) if force else []
    for pid in shells:
        try:
            os.kill(pid, 9)
            actions.append(f"killed Mininet host shell (pid {pid})")
        except ProcessLookupError:
            pass
    journaled = set(data.get("links", [])) if same_boot else set()
    for name in sorted(journaled):
        if not LINK_NAME.fullmatch(name):
            refuse("links", name, f"to delete link {name}: not a name cctest gives its links ({LINK_NAME.pattern})")
            journaled.discard(name)
    names = (journaled & set(root_links())) | (set(pattern_links()) if force else set())
    for name in sorted(names):
        # Deleting one end of a veth deletes its peer: gone is as good as deleted.
        if _run(["ip", "link", "del", name]).returncode == 0 or name not in root_links():
            actions.append(f"deleted link {name}")
        else:
            actions.append(f"could not delete link {name}")
            remaining["links"].append(name)
    for ns in doctor_namespaces() if force else []:
        if _run(["ip", "netns", "del", ns]).returncode == 0:
            actions.append(f"deleted network namespace {ns}")
    for mount in data.get("mounts", []) if same_boot else []:
        try:
            if tracefs.unmount(Path(mount)):
                actions.append(f"unmounted tracefs at {mount}")
        except tracefs.TracefsError as error:
            actions.append(f"could not unmount {mount}: {error}")
            remaining["mounts"].append(mount)
    for key, old in data.get("sysctls", {}).items():
        if key not in ROOT_SYSCTLS:
            refuse("sysctls", {key: old}, f"to write sysctl {key}={old}: cctest sets no such sysctl outside its "
                                          "namespaces")
            continue
        if _run(["sysctl", "-qw", f"{key}={old}"]).returncode == 0:
            actions.append(f"restored sysctl {key}={old}")
        else:
            actions.append(f"could not restore sysctl {key}={old}")
            remaining["sysctls"][key] = old
    for entry in reversed(data.get("modules", [])):
        entry = {"name": entry, "identity": None} if isinstance(entry, str) else entry
        if entry["name"] not in OWN_MODULES:
            refuse("modules", entry, f"to unload module {entry['name']}: not one cctest loads")
            continue
        outcome = _unload_journaled(entry, same_boot, force, sys_module)
        if outcome:
            actions.append(outcome)
        if outcome and outcome.startswith("could not"):
            remaining["modules"].insert(0, entry)
    if not data:
        return actions
    if any(refused.values()):
        for key, entries in refused.items():
            if isinstance(entries, dict):
                remaining[key].update(entries)
            elif key != "hosts":
                remaining[key] += entries
        data.update(remaining)
        _write_json(journal_path, data)
        actions.append(f"kept {journal_path}: it names what cctest could not have written (refused above); "
                       "inspect it, then delete it")
    elif any(remaining[k] for k in ("processes", "modules", "links", "sysctls", "cgroup", "mounts")):
        data.update(remaining)
        _write_json(journal_path, data)
        actions.append(f"kept {journal_path}: it names what is still to undo")
    else:
        journal_path.unlink(missing_ok=True)
        actions.append(f"removed {journal_path}")
    return actions


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _process_problem(pid: int, group: str | None) -> str | None:
    """Why a journaled, still-running process (its start time matches) is not one to kill: with a
    run cgroup journaled, it must be in it (everything in it was killed above, so a survivor is
    not the run's); without one, it must run a program cctest starts."""
    if group:
        where = process_cgroup(pid)
        if where is None or not group.endswith(where) or Path(where).name != Path(group).name:
            return f"not in the run's cgroup {Path(group).name} (in {where or 'none'})"
        return None
    command = process_command(pid)
    if command not in COMMANDS:
        return f"it runs {command or 'nothing readable'}, not a program cctest starts ({', '.join(COMMANDS)})"
    return None


def _unload_journaled(entry: dict, same_boot: bool, force: bool, sys_module: Path) -> str | None:
    """Unload a journaled module only if it is the load the run made. Returns what was done."""
    name, identity = entry["name"], entry.get("identity")
    if not (sys_module / name).exists() or not same_boot:
        return None
    if not force:
        if identity is None:
            return (f"left module {name} loaded: the run was killed while loading it, so whether this load "
                    f"is the run's is unknown; `cctest modules unload` it if it is")
        if module_identity(name, sys_module) != identity:
            return f"left module {name} loaded: it was loaded again after the run"
    try:
        kmod.unload(name)  # retries: the killed namespaces release their sockets late
        return f"unloaded module {name}"
    except kmod.ModuleError as error:
        return f"could not unload {name}: {error}"
