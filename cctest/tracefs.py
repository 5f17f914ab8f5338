"""The tracefs mount bpftrace needs: mounted by cctest only if absent, and then unmounted again.

A mount cctest made is journaled before it is made, so `cctest clean` unmounts it after a SIGKILL;
one that was there before the run is never touched.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import CctestError

MOUNTPOINT = Path("/sys/kernel/tracing")
# Where a mounted tracefs is found: its own mountpoint, or debugfs's automount of it.
CANDIDATES = (MOUNTPOINT, Path("/sys/kernel/debug/tracing"))


class TracefsError(CctestError):
    pass


def mounted() -> Path | None:
    for path in CANDIDATES:
        if (path / "events").is_dir():
            return path
    return None


def is_tracefs_mount(path: Path, mounts: Path = Path("/proc/self/mounts")) -> bool:
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return False
    return any(fields[1:3] == [str(path), "tracefs"] for fields in (line.split() for line in lines))


def mount_if_absent(journal_mount=None) -> Path | None:
    """Mount tracefs if none is reachable. Returns the mountpoint if this call mounted it (the caller
    unmounts it), None if one was there already or it cannot be mounted (bpftrace then says so).
    `journal_mount(path)` records the mount before it is made: a SIGKILL mid-mount leaves it named."""
    if mounted() is not None:
        return None
    if journal_mount is not None:
        journal_mount(str(MOUNTPOINT))
    if subprocess.run(["mount", "-t", "tracefs", "nodev", str(MOUNTPOINT)], capture_output=True).returncode != 0:
        return None
    return MOUNTPOINT


def unmount(path: Path) -> bool:
    """Unmount a tracefs mount cctest made. Returns whether there was one to unmount; TracefsError if
    it stays (busy: some tracer still holds it)."""
    if not is_tracefs_mount(path):
        return False
    result = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise TracefsError(f"umount {path}: {result.stderr.strip() or 'failed'}")
    return True
