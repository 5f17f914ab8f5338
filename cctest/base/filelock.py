"""flock(2) on a lock file, shared or exclusive, saying once when it has to wait.

The lock dies with its process (even on SIGKILL), so a crashed holder never blocks anyone.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import TextIO

from .errors import CctestError


class Busy(CctestError):
    """The lock is held by another process (non-blocking request)."""


def open_lock(path: Path) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a+")


def take(lock_file: TextIO, exclusive: bool, waiting: str | None = None, block: bool = True) -> None:
    """Lock `lock_file` (converting a lock it already has). If another process holds it: with `block`,
    print `waiting` once to stderr and wait; else raise Busy. An exclusive holder writes its PID."""
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    try:
        fcntl.flock(lock_file, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        if not block:
            raise Busy(holder(lock_file)) from None
        if waiting:
            print(waiting, file=sys.stderr, flush=True)
        fcntl.flock(lock_file, mode)
    if exclusive:
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(f"{os.getpid()}\n")
        lock_file.flush()


def holder(lock_file: TextIO) -> str:
    """'pid N' of the last exclusive holder, as it wrote it."""
    lock_file.seek(0)
    text = lock_file.read().strip()
    return f"pid {text}" if text.isdigit() else "pid unknown"


def release(lock_file: TextIO) -> None:
    fcntl.flock(lock_file, fcntl.LOCK_UN)
    lock_file.close()
