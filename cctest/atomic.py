"""Whole files or nothing: write beside the target, then rename over it.

A reader (`cctest report` on a sweep still running) or a crash mid-write never sees half a file:
rename within one directory is atomic.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path):
    """Yields a temporary path beside `path`; on success it replaces `path`, on error it goes."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text)
