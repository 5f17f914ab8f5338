"""`cctest fetch`: the runs a manifest lists (model/archive.py), downloaded from where it says, each
checked against it and unpacked into DEST/<scenario>/<run_id>/ whole or not at all.

A run is downloaded into a hidden folder beside its destination, its archive's size and sha256
compared with the manifest's before it is opened, then every member's as it is unpacked; only
when all match is the folder renamed into place. Any difference is bad input (exit 2) naming the
run and what differs, and nothing of the run is left: no archive, no folder (those made for it
removed too). A download that fails (no connection, an HTTP error) is a failure (exit 1), and an
interrupt ends the command; both clean up the same way. A run already in DEST is checked file by
file against the manifest and skipped; one that differs is refused before anything is downloaded,
and left as it is.

Nothing is downloaded but what `cctest fetch` is asked for: file://, http:// and https:// URLs,
through urllib (its proxies from the environment, redirects followed as a release's download
URL needs)."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from ..base.errors import BadInput, CctestError
from ..model.archive import ArchivedRun, Manifest, archive_url, check_base_url, check_member_path

DOWNLOAD_TIMEOUT_S = 60  # the longest wait for a connection or its next bytes
CHUNK = 1 << 20


class DownloadFailed(CctestError):
    """An archive could not be downloaded (the connection, the server, the file's absence)."""


@dataclass
class Fetched:
    fetched: int = 0
    present: int = 0
    bytes: int = 0


def shown_size(size: int) -> str:
    return f"{size / 1e3:.0f} kB" if size < 1e6 else f"{size / 1e6:.1f} MB"


def select(manifest: Manifest, only: tuple[str, ...], source: Path) -> list[ArchivedRun]:
    """The manifest's runs whose scenario, run id or scenario/run_id is one of `only` (all when it
    is empty); BadInput for a value no run has."""
    def matches(run: ArchivedRun, value: str) -> bool:
        return value in (run.scenario, run.run_id, run.where)

    for value in only:
        if not any(matches(run, value) for run in manifest.runs):
            scenarios = sorted({run.scenario for run in manifest.runs})
            listed = ", ".join(scenarios[:10]) + (f" and {len(scenarios) - 10} more" if len(scenarios) > 10 else "")
            raise BadInput(f"--only {value}: no run in {source} has that scenario, run id or scenario/run_id "
                           f"(its scenarios: {listed or 'none'})")
    return [run for run in manifest.runs if not only or any(matches(run, value) for value in only)]


def _check_folder(path: Path, what: str, link_ok: bool = False) -> bool:
    """Whether the folder `path` exists; BadInput when something else is there."""
    try:
        mode = (os.stat if link_ok else os.lstat)(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as error:
        raise BadInput(f"{path}: cannot be read ({error.strerror}); {what}") from None
    if not stat.S_ISDIR(mode):
        from ..base.safeload import kind_of

        raise BadInput(f"{path}: is {'a regular file' if stat.S_ISREG(mode) else kind_of(mode)}; {what}")
    return True


def _file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def differences(run: ArchivedRun, folder: Path) -> str | None:
    """How the run directory `folder` differs from the manifest's `run`, None when it holds
    exactly the files listed, each with its sha256."""
    from .archive import entries_of

    try:
        files = {e.path for e in entries_of(folder) if not e.folder}
    except BadInput as error:
        return str(error)
    listed = {m.path: m for m in run.members}
    if files - listed.keys():
        return f"it holds {min(files - listed.keys())}, which the manifest does not list"
    if listed.keys() - files:
        return f"it lacks {min(listed.keys() - files)}, which the manifest lists"
    for member in run.members:
        found = _file_sha256(folder / member.path)
        if found != member.sha256:
            return f"its {member.path} has sha256 {found}, the manifest says {member.sha256}"
    return None


def _download(url: str, into: BinaryIO, run: ArchivedRun) -> None:
    """Write the archive at `url` into `into`; BadInput unless it has the manifest's size and sha256."""
    import urllib.error
    import urllib.request

    from .. import __version__

    sha, size = hashlib.sha256(), 0
    request = urllib.request.Request(url, headers={"User-Agent": f"cctest/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response:
            while chunk := response.read(CHUNK):
                size += len(chunk)
                if size > run.size:
                    raise BadInput(f"{run.where}: {url} holds more than the manifest's {run.size} bytes; nothing "
                                   "of the run was kept")
                sha.update(chunk)
                into.write(chunk)
    except urllib.error.HTTPError as error:
        raise DownloadFailed(f"{url}: HTTP {error.code} {error.reason}; nothing of {run.where} was kept") from None
    except urllib.error.URLError as error:
        raise DownloadFailed(f"{url}: cannot be downloaded ({error.reason}); nothing of {run.where} was "
                             "kept") from None
    except OSError as error:
        raise DownloadFailed(f"{url}: the download failed ({error}); nothing of {run.where} was kept") from None
    if size != run.size:
        raise BadInput(f"{run.where}: {url} holds {size} bytes, the manifest says {run.size}; nothing of the run "
                       "was kept")
    if sha.hexdigest() != run.sha256:
        raise BadInput(f"{run.where}: {url} has sha256 {sha.hexdigest()}, the manifest says {run.sha256}; "
                       "nothing of the run was kept")


def _write_member(source: IO[bytes], path: Path, executable: bool) -> str:
    """Copy `source` into the new file `path`; its sha256."""
    sha = hashlib.sha256()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags, 0o777 if executable else 0o666), "wb") as out:
        while chunk := source.read(CHUNK):
            sha.update(chunk)
            out.write(chunk)
    return sha.hexdigest()


def _unpack(archive: Path, root: Path, run: ArchivedRun) -> None:
    """Unpack the run's archive into the new folder `root`, every member checked against the
    manifest; BadInput at the first difference."""
    def differs(what: str) -> BadInput:
        return BadInput(f"{run.where}: its archive {run.file} {what}; nothing of the run was kept")

    listed = {m.path: m for m in run.members}
    seen: set[str] = set()
    prefix = f"{run.where}/"
    os.mkdir(root)
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for info in tar:
                name = info.name.rstrip("/")
                if name == run.where and info.isdir():
                    continue
                relative = name.removeprefix(prefix)
                try:
                    if not name.startswith(prefix):
                        raise ValueError
                    check_member_path(relative)
                except ValueError:
                    raise differs(f"holds {name!r}, which is no path inside {run.where}/") from None
                if info.isdir() and relative not in listed:
                    if any(str(folder) in listed for folder in PurePosixPath(relative).parents):
                        raise differs(f"holds the folder {relative}, inside what the manifest lists as a file")
                    (root / relative).mkdir(parents=True, exist_ok=True)
                    continue
                member = listed.get(relative)
                if not info.isreg() or member is None or relative in seen:
                    raise differs(f"holds {relative}, which the manifest does not list as a file of the run")
                if info.size != member.size:
                    raise differs(f"holds {relative} of {info.size} bytes, the manifest says {member.size}")
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(info)
                assert source is not None  # a regular file's member has its data
                found = _write_member(source, root / relative, executable=bool(info.mode & 0o111))
                if found != member.sha256:
                    raise differs(f"holds {relative} with sha256 {found}, the manifest says {member.sha256}")
                seen.add(relative)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise differs(f"cannot be unpacked ({type(error).__name__}: {error})") from None
    if listed.keys() - seen:
        raise differs(f"lacks {min(listed.keys() - seen)}, which the manifest lists")


def _made_folders(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; those made, outermost first."""
    missing = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        os.mkdir(path)
    return list(reversed(missing))


def fetch_run(run: ArchivedRun, url: str, target: Path) -> None:
    """Download, check and unpack one run into `target`, which is made whole or not at all."""
    made = _made_folders(target.parent)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", suffix=".part", dir=target.parent))
    try:
        with open(work / run.file, "xb") as archive:
            _download(url, archive, run)
        _unpack(work / run.file, work / "run", run)
        os.rename(work / "run", target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(work)


def fetch(manifest_path: Path, dest: Path, only: tuple[str, ...], base_url: str | None,
          say: Callable[[str], None]) -> Fetched:
    """`cctest fetch`: every selected run of the manifest into dest/<scenario>/<run_id>/."""
    from ..model import archive

    if base_url is not None:
        try:
            check_base_url(base_url)
        except ValueError as error:
            raise BadInput(f"--base-url {error}") from None
    manifest = archive.read(manifest_path)
    base = base_url or manifest.base_url or manifest_path.resolve().parent.as_uri()
    runs = select(manifest, only, manifest_path)
    _check_folder(dest, "DEST is the folder the runs go in", link_ok=True)
    present: set[str] = set()
    for run in runs:
        _check_folder(dest / run.scenario, f"a folder holds the runs of scenario {run.scenario}")
        if _check_folder(dest / run.where, "a folder holds the run"):
            problem = differences(run, dest / run.where)
            if problem is not None:
                raise BadInput(f"{dest / run.where}: already there, but {problem}; move it away to fetch the "
                               "run again")
            present.add(run.where)
    done = Fetched(present=len(present))
    for run in runs:
        if run.where in present:
            say(f"{run.where}: already there, every file as the manifest says; skipped")
            continue
        fetch_run(run, archive_url(base, run.file), dest / run.where)
        done.fetched += 1
        done.bytes += sum(m.size for m in run.members)
        say(f"{run.where}: fetched and checked ({len(run.members)} files, {shown_size(run.size)} archived)")
    return done
