"""One active run per machine, and a journal of everything it created.

The lock (flock) refuses a second concurrent `cctest run`. The journal is written *before* each
side effect, so that `cctest clean` can undo a run that was killed with SIGKILL: it names the
processes started, the modules loaded and the sysctls changed (with their old values).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
from pathlib import Path

from . import kmod
from .dumbbell import NODE_PREFIX

STATE_DIR = Path(os.environ.get("CCTEST_STATE_DIR", "/run/cctest"))


class RunLockedError(Exception):
    pass


class Journal:
    def __init__(self, state_dir: Path = STATE_DIR):
        self.dir = state_dir
        self.path = state_dir / "active.json"
        self._lock_file = None
        self.data: dict = {"pid": os.getpid(), "processes": [], "modules": [], "sysctls": {}}

    def acquire(self, description: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.dir / "lock", "a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_journal(self.path).get("description", "another run")
            self._lock_file.close()
            self._lock_file = None
            raise RunLockedError(f"another cctest run is active ({holder}); wait for it to finish") from None
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
        self.data["processes"].append({"pid": pid, "what": what})
        self._write()

    def add_module(self, name: str) -> None:
        self.data["modules"].append(name)
        self._write()

    def add_sysctl(self, key: str, old: str) -> None:
        self.data["sysctls"].setdefault(key, old)
        self._write()

    def finish(self) -> None:
        """Everything was undone: forget it and let the next run in."""
        self.path.unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None


def read_journal(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def leftover_links() -> list[str]:
    """Interfaces in the root namespace that only a cctest run creates (ccs1-btl, ccs2-rcv0, ...)."""
    out = _run(["ip", "-o", "link", "show"]).stdout
    names = re.findall(r"^\d+:\s+([^:@\s]+)", out, flags=re.M)
    return [n for n in names if re.fullmatch(rf"{NODE_PREFIX}(s\d+|snd\d+|rcv\d+)(-\w+)?", n)]


def leftover_host_shells() -> list[int]:
    """Mininet host shells of cctest nodes (each holds a network namespace open)."""
    out = _run(["pgrep", "-f", rf"mininet:{NODE_PREFIX}(snd|rcv|s)\d+"]).stdout
    return [int(pid) for pid in out.split()]


def clean(state_dir: Path = STATE_DIR) -> list[str]:
    """Undo whatever a killed run left behind. Returns a line per action taken."""
    actions: list[str] = []
    journal_path = state_dir / "active.json"
    data = read_journal(journal_path)
    for proc in data.get("processes", []):
        try:
            os.kill(proc["pid"], 9)
            actions.append(f"killed {proc['what']} (pid {proc['pid']})")
        except (ProcessLookupError, PermissionError):
            pass
    for pid in leftover_host_shells():
        try:
            os.kill(pid, 9)
            actions.append(f"killed Mininet host shell (pid {pid})")
        except ProcessLookupError:
            pass
    for name in leftover_links():
        if _run(["ip", "link", "del", name]).returncode == 0:
            actions.append(f"deleted link {name}")
    for key, old in data.get("sysctls", {}).items():
        if _run(["sysctl", "-qw", f"{key}={old}"]).returncode == 0:
            actions.append(f"restored sysctl {key}={old}")
    for module in reversed(data.get("modules", [])):
        if not Path("/sys/module", module).exists():
            continue
        try:
            kmod.unload(module)  # retries: the killed namespaces release their sockets late
            actions.append(f"unloaded module {module}")
        except kmod.ModuleError as error:
            actions.append(f"could not unload {module}: {error}")
    if journal_path.exists():
        journal_path.unlink()
        actions.append(f"removed {journal_path}")
    return actions
