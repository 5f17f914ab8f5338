"""The root namespace's sysctls a session raises (dumbbell.ROOT_SYSCTL_MINIMUMS): each only where
it is lower, journaled before it is written, and restored when the session ends (`cctest clean`
restores it after a crash)."""

from __future__ import annotations

from pathlib import Path

from ...model import dumbbell
from ..journal import Journal

PROC_SYS = Path("/proc/sys")
SCOPE = "the root network namespace (raised only if lower; restored when the session ends)"


def _path(key: str) -> Path:
    return PROC_SYS / key.replace(".", "/")


def write(key: str, value: str) -> None:
    """Write a root-namespace sysctl (an OSError where it cannot be written)."""
    _path(key).write_text(value)


def raise_minimums(journal: Journal) -> dict[str, dict]:
    """Raise each to its minimum where lower; meta.json's record of each (old, new, scope)."""
    record = {}
    for key, minimum in dumbbell.ROOT_SYSCTL_MINIMUMS.items():
        old = _path(key).read_text().strip()
        new = old
        if int(old) < minimum:
            journal.add_sysctl(key, old)
            write(key, str(minimum))
            new = str(minimum)
        record[key] = {"old": old, "new": new, "scope": SCOPE}
    return record


def restore(record: dict[str, dict], journal: Journal) -> list[str]:
    """Write back what raise_minimums changed; the keys it could not restore (left in the journal)."""
    failed = []
    for key, entry in record.items():
        if entry["old"] == entry["new"]:
            continue
        try:
            write(key, entry["old"])
        except OSError:
            failed.append(key)
            continue
        journal.sysctl_restored(key)
    return failed
