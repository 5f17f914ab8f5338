"""`cctest archive`: every run directory under a folder packed into one archive of its own, the
same bytes each time it is packed, beside the manifest that lists them (model/archive.py says
what an archive holds and how its bytes are fixed).

Everything is planned before the first byte is written: the runs found, their scenario and run id
read from meta.json, every file they hold (regular files and folders only: a link, a FIFO or a
device in a run is bad input, as for every reader of runs), and every output checked. Each
archive is written whole or not at all, and the manifest last."""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..base.errors import BadInput, CctestError
from ..model.archive import (
    MANIFEST_FILE,
    ArchivedRun,
    Manifest,
    Member,
    archive_name,
    check_base_url,
    check_member_path,
    check_name,
    member_prefix,
)
from ..model.compact import shown
from ..model.record import names_as_written

GZIP_LEVEL = 6  # gzip's default: a run's tables are parquet, compressed already; level 9 saves little
CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """A file or folder of a run directory, as planned."""

    path: str  # below the run directory, / separated
    folder: bool
    executable: bool = False


@dataclass(frozen=True)
class Planned:
    run_dir: Path
    scenario: str
    run_id: str
    file: str  # the archive's name in DEST
    entries: tuple[Entry, ...]  # in the archive's order


def entries_of(run_dir: Path) -> list[Entry]:
    """Every folder and regular file below `run_dir`, in the archive's order (by path, a folder
    before what it holds), links never followed; BadInput naming anything else found."""
    from ..base.safeload import kind_of

    found: list[Entry] = []
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(run_dir / folder if folder else run_dir) as it:
                listed = list(it)
        except OSError as error:
            raise BadInput(f"{shown(run_dir / folder)}: cannot be read ({error.strerror})") from None
        for entry in listed:
            relative = f"{folder}/{entry.name}" if folder else entry.name
            try:
                check_member_path(relative)
                relative.encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                raise BadInput(f"{shown(run_dir / relative)}: a name an archive's manifest cannot hold "
                               "(printable UTF-8 only)") from None
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                found.append(Entry(relative, folder=True))
                stack.append(relative)
            elif stat.S_ISREG(mode):
                found.append(Entry(relative, folder=False, executable=bool(mode & 0o111)))
            else:
                raise BadInput(f"{shown(run_dir / relative)}: is {kind_of(mode)}; an archive holds a run's "
                               "regular files and folders only")
    return sorted(found, key=lambda e: e.path.split("/"))


def _plan_run(run_dir: Path) -> Planned:
    from ..model import runfiles

    data = runfiles.read_json(run_dir, "meta.json")
    if not isinstance(data, dict):
        raise BadInput(f"{shown(run_dir / 'meta.json')}: not a JSON object; a meta.json is one")
    names = []
    for key, value in names_as_written(data).items():
        try:
            names.append(check_name(value))
        except ValueError as error:
            raise BadInput(f"{shown(run_dir / 'meta.json')}: {key} {error}; an archive names a run by its "
                           "scenario and run id") from None
    scenario, run_id = names
    return Planned(run_dir, scenario, run_id, archive_name(scenario, run_id), tuple(entries_of(run_dir)))


def plan(src: Path, dest: Path, base_url: str | None) -> list[Planned]:
    """What `cctest archive SRC DEST` will write; nothing is written. Runs that cannot be packed,
    two runs of one name, and outputs that cannot be written are bad input."""
    from ..base import atomic
    from .load import find_run_dirs

    if base_url is not None:
        try:
            check_base_url(base_url)
        except ValueError as error:
            raise BadInput(f"--base-url {error}") from None
    found = find_run_dirs(src)
    records = [d for d in found if not (d / "meta.json").exists()]
    if records:
        raise BadInput(f"{shown(records[0])}: a compact record, not a run directory; cctest archive packs "
                       "run directories (with meta.json)")
    planned = [_plan_run(run_dir) for run_dir in found]
    for key, what in ((lambda p: member_prefix(p.scenario, p.run_id), "scenario/run id"),
                      (lambda p: p.file, "archive name")):
        first: dict[str, Path] = {}
        for p in planned:
            other = first.setdefault(key(p), p.run_dir)
            if other != p.run_dir:
                raise BadInput(f"{shown(p.run_dir)}: the same {what} ({key(p)}) as {shown(other)}; archive them "
                               "from separate folders into separate destinations")
    outputs = [(dest / p.file, f"the archive of {shown(p.run_dir)}") for p in planned]
    atomic.check_outputs([*outputs, (dest / MANIFEST_FILE, "the manifest")], run_dirs=found)
    return planned


class _HashingWriter:
    """A binary file that hashes and counts what is written to it."""

    def __init__(self, out: BinaryIO):
        self.out, self.sha256, self.size = out, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.out.write(data)
        self.sha256.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.out.flush()


class _HashingReader:
    def __init__(self, source: BinaryIO):
        self.source, self.sha256, self.size = source, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.sha256.update(data)
        self.size += len(data)
        return data


def _tarinfo(name: str, folder: bool, executable: bool, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if folder else tarfile.REGTYPE
    info.mode = 0o755 if folder or executable else 0o644
    info.size = size
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def pack(planned: Planned, out: BinaryIO) -> tuple[list[Member], int, str]:
    """Write `planned`'s archive to `out`: its members, and the archive's size and sha256."""
    from ..model import runfiles

    members: list[Member] = []
    sink = _HashingWriter(out)
    prefix = member_prefix(planned.scenario, planned.run_id)
    with (gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=GZIP_LEVEL, mtime=0) as gz,
          tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar):
        tar.addfile(_tarinfo(prefix, folder=True, executable=False))
        for entry in planned.entries:
            name = f"{prefix}/{entry.path}"
            if entry.folder:
                tar.addfile(_tarinfo(name, folder=True, executable=False))
                continue
            with os.fdopen(runfiles.open_in_run(planned.run_dir, entry.path), "rb") as source:
                size = os.fstat(source.fileno()).st_size
                reader = _HashingReader(source)
                try:
                    tar.addfile(_tarinfo(name, folder=False, executable=entry.executable, size=size), reader)
                except OSError as error:  # tarfile's "unexpected end of data": the file shrank
                    raise CctestError(f"{shown(planned.run_dir / entry.path)}: changed while it was packed "
                                      f"({error}); archive the run once nothing writes to it") from None
            members.append(Member(path=entry.path, size=size, sha256=reader.sha256.hexdigest()))
    return members, sink.size, sink.sha256.hexdigest()


def write(planned: list[Planned], dest: Path, base_url: str | None) -> Manifest:
    """Write each planned archive into `dest` (whole or not at all), then the manifest."""
    from ..base import atomic

    dest.mkdir(parents=True, exist_ok=True)
    runs = []
    for p in planned:
        with atomic.replacing(dest / p.file) as out:
            members, size, sha256 = pack(p, out)
        runs.append(ArchivedRun(scenario=p.scenario, run_id=p.run_id, file=p.file, size=size, sha256=sha256,
                                members=members))
    manifest = Manifest(base_url=base_url, runs=sorted(runs, key=lambda r: (r.scenario, r.run_id)))
    atomic.write_text(dest / MANIFEST_FILE, manifest.to_json())
    return manifest
