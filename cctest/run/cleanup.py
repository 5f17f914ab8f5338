"""`cctest clean`: undo what a killed run left behind, as its journal (host/journal.py) names it.

The replay is a list of undo steps, run in order: the run's cgroup first (killing it ends every
process the run started, journaled or not), then the journaled processes, the host shells, the
links, the probe namespaces, the tracefs instances and mount, the sysctls and the modules. Each
step says in one line what it did, could not do, or refused.

`clean` touches only what the journal names, and only what cctest itself could have written: a
name with its prefixes, one of its own modules, a program it starts, a process in its cgroup.
Anything else in a journal is refused (someone else wrote it). Name patterns are used only with
--force. The journal is kept, naming what is still to undo, when something could not be undone.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import BadInput
from ..host import cgroup, tracefs
from ..host.journal import (
    STATE_DIR,
    SYS_MODULE,
    boot_id,
    is_same_process,
    lock_holder,
    module_identity,
    process_cgroup,
    process_command,
    read_journal,
    take_lock,
    unlock,
    write_journal,
)
from ..host.net import rootsysctl
from ..kernel import kmod
from ..model.dumbbell import NODE_PREFIX, ROOT_SYSCTL_MINIMUMS
from .doctor import DOCTOR_NS_PREFIX

# What cctest itself could have written, and so all `clean` replays: names with its prefixes,
# its own modules, the commands it starts, the root-namespace sysctls a session raises (every other
# one it sets lives in a namespace that dies with the run).
LINK_NAME = re.compile(rf"{NODE_PREFIX}(s\d+|snd\d+|rcv\d+)(-\w+)?")
HOST_NAME = re.compile(rf"{NODE_PREFIX}(s|snd|rcv)\d+")
ROOT_SYSCTLS: tuple[str, ...] = tuple(ROOT_SYSCTL_MINIMUMS)
COMMANDS = ("iperf3", "sh", "tc", "tcpdump", "bpftrace", "bash", "mnexec")
OWN_MODULES = tuple(kmod.module_name(cc) for cc in kmod.PROJECT_CCS + kmod.KERNEL_CCS)
# What a journal names that is still to undo once `clean` has done what it could.
UNDONE_KEYS = ("processes", "modules", "links", "sysctls", "cgroup", "tracefs_instances", "mounts")


class CleanRefused(BadInput):
    """`clean` would risk harm (a run is active): a one-line reason (exit 2)."""


def clean(state_dir: Path = STATE_DIR, force: bool = False, sys_module: Path = SYS_MODULE) -> list[str]:
    """Undo whatever a killed run left behind. Returns a line per action taken or refused."""
    lock_file = take_lock(state_dir)
    if lock_file is None and not force:
        raise CleanRefused(f"a run is active ({lock_holder(state_dir)}); let it finish, or use --force")
    try:
        return replay(state_dir / "active.json", force, sys_module)
    finally:
        if lock_file is not None:
            unlock(lock_file)


@dataclass
class Replay:
    """One `clean` under way: the journal, the lines said, what is left to undo and what was refused."""

    data: dict
    force: bool
    sys_module: Path
    same_boot: bool  # what a journal of an earlier boot names is gone with that boot (or no longer ours)
    actions: list[str] = field(default_factory=list)
    remaining: dict = field(init=False)  # what is still to undo: the journal kept names it
    refused: dict = field(default_factory=lambda: {"processes": [], "modules": [], "links": [], "hosts": [],
                                                   "sysctls": {}})

    def __post_init__(self) -> None:
        self.remaining = {"processes": [], "modules": [], "links": [], "hosts": self.data.get("hosts", []),
                          "sysctls": {}, "cgroup": None, "tracefs_instances": [], "mounts": []}

    @property
    def group(self) -> str | None:
        """The run's cgroup, if the journal names one of this boot."""
        return self.data.get("cgroup") if self.same_boot else None

    def journaled(self, key: str) -> list:
        """The journal's entries under `key` that can still exist (this boot's)."""
        return self.data.get(key, []) if self.same_boot else []

    def refuse(self, key: str, entry: Any, line: str) -> None:
        self.actions.append(f"refused {line}")
        if isinstance(self.refused[key], dict):
            self.refused[key].update(entry)
        else:
            self.refused[key].append(entry)


def replay(journal_path: Path, force: bool, sys_module: Path = SYS_MODULE) -> list[str]:
    """Each undo step in turn, then the journal kept (naming what is left) or removed."""
    data = read_journal(journal_path)
    if not data and not force:
        return []
    state = Replay(data, force, sys_module, same_boot=data.get("boot_id") in (None, boot_id()))
    for step in UNDO_STEPS:
        step(state)
    if data:
        state.actions.append(_settle(state, journal_path))
    return state.actions


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def root_links() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    return re.findall(r"^\d+:\s+([^:@\s]+)", out, flags=re.M)


def pattern_links() -> list[str]:
    """--force only: interfaces that look like a cctest run's (ccs1-btl, ccs2-rcv0, ...)."""
    return [n for n in root_links() if LINK_NAME.fullmatch(n)]


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


def kill_cgroup(state: Replay) -> None:
    """First: whatever the run started, journaled or not, dies with its cgroup."""
    group = state.group
    if not group:
        return
    try:
        killed = cgroup.kill_and_remove(Path(group))
        if killed is not None:
            state.actions.append(f"killed {killed} process(es) in the run's cgroup and removed {group}")
    except (cgroup.CgroupError, OSError) as error:
        state.actions.append(f"could not remove cgroup {group}: {error}")
        state.remaining["cgroup"] = group


def kill_processes(state: Replay) -> None:
    """The journaled processes still running as themselves (same PID and start time)."""
    for proc in state.journaled("processes"):
        pid, what = proc["pid"], proc.get("what", "process")
        if not is_same_process(pid, proc.get("start")):
            continue  # ended (and perhaps its PID given to another process): nothing of ours to kill
        problem = _process_problem(pid, state.group)
        if problem:
            state.refuse("processes", proc, f"to kill pid {pid} ({what}): {problem}")
            continue
        try:
            os.kill(pid, 9)
            state.actions.append(f"killed {what} (pid {pid})")
        except ProcessLookupError:
            pass
        except PermissionError:
            state.actions.append(f"could not kill {what} (pid {pid}): permission denied")
            state.remaining["processes"].append(proc)


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


def kill_host_shells(state: Replay) -> None:
    """Host shells named in the journal were killed above by identity (they are journaled processes,
    and in the run's cgroup); matching names machine-wide is for --force only."""
    for host in state.data.get("hosts", []):
        if not HOST_NAME.fullmatch(host):
            state.refuse("hosts", host, f"host {host}: not a name cctest gives its hosts ({HOST_NAME.pattern})")
    for pid in host_shells(None) if state.force else []:
        try:
            os.kill(pid, 9)
            state.actions.append(f"killed Mininet host shell (pid {pid})")
        except ProcessLookupError:
            pass


def delete_links(state: Replay) -> None:
    """The journaled links that still exist (and, with --force, any cctest-looking one)."""
    journaled = set(state.journaled("links"))
    for name in sorted(journaled):
        if not LINK_NAME.fullmatch(name):
            state.refuse("links", name,
                         f"to delete link {name}: not a name cctest gives its links ({LINK_NAME.pattern})")
            journaled.discard(name)
    names = (journaled & set(root_links())) | (set(pattern_links()) if state.force else set())
    for name in sorted(names):
        # Deleting one end of a veth deletes its peer: gone is as good as deleted.
        if _run(["ip", "link", "del", name]).returncode == 0 or name not in root_links():
            state.actions.append(f"deleted link {name}")
        else:
            state.actions.append(f"could not delete link {name}")
            state.remaining["links"].append(name)


def delete_probe_namespaces(state: Replay) -> None:
    """--force only: the network namespaces of a killed `cctest doctor` probe."""
    for ns in doctor_namespaces() if state.force else []:
        if _run(["ip", "netns", "del", ns]).returncode == 0:
            state.actions.append(f"deleted network namespace {ns}")


def remove_tracefs_instances(state: Replay) -> None:
    """The run's tracefs instances: they keep tracing into their buffers after the run and after any
    unmount. Removed through the mounted tracefs, mounted for the purpose if none is."""
    names = state.journaled("tracefs_instances")
    if not names:
        return
    root, mounted_here = tracefs.mounted(), None
    if root is None:
        root = mounted_here = tracefs.mount_if_absent()
    if root is None:
        state.actions.append(f"could not remove tracefs instance(s) {', '.join(names)}: tracefs cannot be mounted")
        state.remaining["tracefs_instances"] += names
        return
    try:
        for name in names:
            try:
                if tracefs.remove_instance(root, name):
                    state.actions.append(f"removed tracefs instance {name}")
            except tracefs.TracefsError as error:
                state.actions.append(f"could not remove {name}: {error}")
                state.remaining["tracefs_instances"].append(name)
    finally:
        if mounted_here is not None:
            with contextlib.suppress(tracefs.TracefsError):
                tracefs.unmount(mounted_here)


def unmount_tracefs(state: Replay) -> None:
    for mount in state.journaled("mounts"):
        try:
            if tracefs.unmount(Path(mount)):
                state.actions.append(f"unmounted tracefs at {mount}")
        except tracefs.TracefsError as error:
            state.actions.append(f"could not unmount {mount}: {error}")
            state.remaining["mounts"].append(mount)


def restore_sysctls(state: Replay) -> None:
    for key, old in state.data.get("sysctls", {}).items():
        if key not in ROOT_SYSCTLS:
            state.refuse("sysctls", {key: old}, f"to write sysctl {key}={old}: cctest sets no such sysctl outside its "
                                                "namespaces")
            continue
        try:
            rootsysctl.write(key, old)
        except OSError:
            state.actions.append(f"could not restore sysctl {key}={old}")
            state.remaining["sysctls"][key] = old
            continue
        state.actions.append(f"restored sysctl {key}={old}")


def unload_modules(state: Replay) -> None:
    """The journaled modules, last loaded first, each only if it is still the load the run made."""
    for entry in reversed(state.data.get("modules", [])):
        entry = {"name": entry, "identity": None} if isinstance(entry, str) else entry
        if entry["name"] not in OWN_MODULES:
            state.refuse("modules", entry, f"to unload module {entry['name']}: not one cctest loads")
            continue
        outcome = _unload_journaled(entry, state.same_boot, state.force, state.sys_module)
        if outcome:
            state.actions.append(outcome)
        if outcome and outcome.startswith("could not"):
            state.remaining["modules"].insert(0, entry)


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


UNDO_STEPS = (kill_cgroup, kill_processes, kill_host_shells, delete_links, delete_probe_namespaces,
              remove_tracefs_instances, unmount_tracefs, restore_sysctls, unload_modules)


def _settle(state: Replay, journal_path: Path) -> str:
    """Keep the journal, naming what was refused or is still to undo, or remove it: the last line."""
    if any(state.refused.values()):
        for key, entries in state.refused.items():
            if isinstance(entries, dict):
                state.remaining[key].update(entries)
            elif key != "hosts":  # the journal's hosts are kept whole
                state.remaining[key] += entries
        write_journal(journal_path, {**state.data, **state.remaining})
        return (f"kept {journal_path}: it names what cctest could not have written (refused above); "
                "inspect it, then delete it")
    if any(state.remaining[key] for key in UNDONE_KEYS):
        write_journal(journal_path, {**state.data, **state.remaining})
        return f"kept {journal_path}: it names what is still to undo"
    journal_path.unlink(missing_ok=True)
    return f"removed {journal_path}"
