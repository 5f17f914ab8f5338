"""The one writer: whole files or nothing, never through a link, never over an input.

A reader (`cctest report` on a sweep still running) or a crash mid-write never sees half a file:
the content goes to a temporary file beside the target, made by mkstemp (a random name, created
with O_EXCL: no link planted under a predictable name is followed), then renamed over the target
(atomic within one directory; a link at the target is replaced, not written through).

Run directories and output folders may be shared, so every output path is checked before anything
is written (check_outputs): not a link, a FIFO or a device, its parent a directory, not one of the
command's inputs, not inside a run directory it reads. A refused write leaves every file as it was.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import BadInput
from .safeload import kind_of


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_replaceable(path: Path, what: str = "the output") -> None:
    """BadInput unless `path` is absent or a regular file (a link would redirect the write, a FIFO
    or a device would swallow it) in a directory."""
    path = Path(path)
    _check_parent(path, what)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise BadInput(f"{path}: cannot be written ({error.strerror})") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise BadInput(f"{path}: is {kind_of(mode)}; {what} is written as a regular file, never through a "
                       "link, a FIFO or a device")


def _check_parent(path: Path, what: str) -> None:
    """The nearest existing ancestor of `path` must be a directory (mkdir makes the rest)."""
    parent = path.absolute().parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(f"{path}: {parent} is not a directory; {what} goes in a directory")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_outputs(outputs: Iterable[tuple[Path, str]], inputs: Iterable[Path] = (),
                  run_dirs: Iterable[Path] = ()) -> None:
    """Every (path, what) of a command's outputs, before the first is written: replaceable, none
    of them an input or another output, none inside a run directory the command reads."""
    inputs = [Path(p).resolve() for p in inputs]
    runs = [Path(p).resolve() for p in run_dirs]
    seen: dict[Path, str] = {}
    for path, what in outputs:
        path = Path(path)
        check_replaceable(path, what)
        real = path.resolve()
        if real in inputs:
            raise BadInput(f"{path}: is also an input of this command; {what} goes to another file")
        if real in seen:
            raise BadInput(f"{path}: given as both {seen[real]} and {what}; each goes to its own file")
        seen[real] = what
        run = next((run for run in runs if _inside(real, run)), None)
        if run is not None:
            raise BadInput(f"{path}: inside the run directory {run}; {what} goes outside the runs it is made from")


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write `path`'s new content to; on success it replaces `path`, on error it goes."""
    path = Path(path)
    check_replaceable(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide a shared run from its readers
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: Path, data: bytes) -> None:
    with replacing(path) as f:
        f.write(data)


def write_text(path: Path, text: str, errors: str = "strict") -> None:
    write_bytes(path, text.encode("utf-8", errors=errors))
