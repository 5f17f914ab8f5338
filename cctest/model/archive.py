"""The archive of full run directories and its manifest.

The repository keeps a compact record of each run (compact.py); the run directory itself (its
tables and raw captures, megabytes each) is published outside git: `cctest archive SRC DEST` packs
every run directory under SRC into one file of its own in DEST and writes DEST/manifest.json, which
says where the files will be published (`base_url`: a release's download URL, an object store, a
folder as file://), and per run its scenario, run id, file name, size and sha256, and the size and
sha256 of every file the run holds. `cctest fetch MANIFEST DEST` downloads the files from there,
checks each against the manifest, and unpacks each run into DEST/<scenario>/<run_id>/.

An archive's bytes depend on the run directory's content alone, so the same run gives the same
sha256 wherever and whenever it is packed (with the same zlib): a tar (POSIX pax format) whose
members are `<scenario>/<run_id>/<path>` in name order, folders before what they hold, every
member's time 0, owner 0:0 without names, mode 0755 for folders and for files with an execute
bit, 0644 for the others; compressed by gzip at level 6 with no name and time 0 in its header.

The manifest is read as strictly as a record: every field typed, no key left unknown, a file name
that stays the same as a release asset (GitHub renames other characters), paths that stay inside
their run. Anything else is bad input naming the manifest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import PlainValidator, model_validator

from ..base.errors import BadInput
from ..base.strict import Strict
from . import versioned
from .record import Int, _shown

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1  # what this code writes
READABLE_VERSIONS = (1,)
FORMAT: Final = "tar.gz"  # the one archive format: gzip is in every Python; zstd is not before 3.14
MAX_MANIFEST_BYTES = 64 << 20  # a run's entry is about 2 kB: room for tens of thousands of runs
MAX_NAME_CHARS = 255  # a file name's limit on Linux file systems
URL_SCHEMES = ("file", "http", "https")
ASSET_CHARS = re.compile(r"[^A-Za-z0-9._-]")  # what a GitHub release asset's name keeps as given


class ManifestError(BadInput):
    """A manifest this code cannot read, or one it cannot write: the message names it."""


def _sha256(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ValueError(f"must be a sha256 (64 lowercase hex digits), not {_shown(value)}")
    return value


def _size(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"must be a size in bytes (an integer >= 0), not {_shown(value)}")
    return value


def check_name(value: Any) -> str:
    """A scenario or a run id: one folder's name that is neither hidden nor special."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise ValueError(f"must be a folder's name of 1 to {MAX_NAME_CHARS} characters, not {_shown(value)}")
    if value.startswith(".") or "/" in value or "\\" in value or not value.isprintable():
        raise ValueError(f"must be one folder's name (printable, no /, not starting with .), not {_shown(value)}")
    return value


def check_member_path(value: Any) -> str:
    """A file's path inside its run directory: relative, in / form, each part a plain name."""
    if not isinstance(value, str) or not value or not value.isprintable() or "\\" in value:
        raise ValueError(f"must be a relative path inside the run, not {_shown(value)}")
    parts = value.split("/")
    if any(part in ("", ".", "..") or len(part) > MAX_NAME_CHARS for part in parts):
        raise ValueError(f"must be a relative path inside the run (no empty, . or .. part), not {_shown(value)}")
    return value


def _file_name(value: Any) -> str:
    if (not isinstance(value, str) or len(value) > MAX_NAME_CHARS or ASSET_CHARS.search(value)
            or value.startswith(".") or not value.endswith(f".{FORMAT}")):
        raise ValueError(f"must be a file name of letters, digits and ._- ending in .{FORMAT}, not {_shown(value)}")
    return value


def check_base_url(value: Any) -> str:
    """Where the archives are published: a file://, http:// or https:// URL of a folder."""
    if not isinstance(value, str) or not value.isprintable() or " " in value:
        raise ValueError(f"must be a URL, not {_shown(value)}")
    parts = urlsplit(value)
    if parts.scheme not in URL_SCHEMES:
        raise ValueError(f"must be a file://, http:// or https:// URL, not {_shown(value)}")
    if parts.scheme == "file" and (parts.netloc not in ("", "localhost") or not parts.path.startswith("/")):
        raise ValueError(f"must name a folder by its absolute path (file:///path/), not {_shown(value)}")
    if parts.scheme != "file" and not parts.hostname:
        raise ValueError(f"must name a host ({parts.scheme}://host/path/), not {_shown(value)}")
    if parts.query or parts.fragment:
        raise ValueError(f"must be a folder's URL without ?query or #fragment, not {_shown(value)}")
    return value


Sha256 = Annotated[str, PlainValidator(_sha256)]
Size = Annotated[int, PlainValidator(_size)]
Name = Annotated[str, PlainValidator(check_name)]
MemberPath = Annotated[str, PlainValidator(check_member_path)]
FileName = Annotated[str, PlainValidator(_file_name)]
BaseUrl = Annotated[str, PlainValidator(check_base_url)]


def archive_name(scenario: str, run_id: str) -> str:
    """The file a run is packed into: scenario and run id, with every character a release asset's
    name would not keep as given made `_`."""
    return ASSET_CHARS.sub("_", f"{scenario}__{run_id}") + f".{FORMAT}"


def member_prefix(scenario: str, run_id: str) -> str:
    """The folder every member of a run's archive lies in."""
    return f"{scenario}/{run_id}"


class Member(Strict):
    """One file of the run directory."""

    path: MemberPath  # below the run directory, e.g. raw/ss.jsonl
    size: Size
    sha256: Sha256


class ArchivedRun(Strict):
    """One run directory, packed into `file`."""

    scenario: Name
    run_id: Name
    file: FileName
    size: Size  # the archive's
    sha256: Sha256  # the archive's
    members: list[Member]  # every file of the run directory, in name order

    @model_validator(mode="after")
    def _paths_fit_one_tree(self) -> ArchivedRun:
        paths = [m.path for m in self.members]
        twice = _repeated(paths)
        if twice is not None:
            raise ValueError(f"members: {twice} is listed twice")
        folders = {str(parent) for p in paths for parent in PurePosixPath(p).parents}
        clash = folders & set(paths)
        if clash:
            raise ValueError(f"members: {min(clash)} is listed as a file and as a folder of others")
        return self

    @property
    def where(self) -> str:
        return member_prefix(self.scenario, self.run_id)


class Manifest(Strict):
    """manifest.json: where the archives are, and what each holds."""

    manifest_version: Int = MANIFEST_VERSION
    format: Literal["tar.gz"] = FORMAT
    base_url: BaseUrl | None = None  # null: the archives lie beside the manifest
    runs: list[ArchivedRun]

    @model_validator(mode="after")
    def _runs_are_distinct(self) -> Manifest:
        for what, values in (("scenario/run_id", [run.where for run in self.runs]),
                             ("file", [run.file for run in self.runs])):
            twice = _repeated(values)
            if twice is not None:
                raise ValueError(f"runs: {what} {twice} is listed twice")
        return self

    def to_json(self) -> str:
        """The manifest's text: a line per field, and one per member file."""
        def run_text(run: dict) -> str:
            members = run.pop("members")
            fields = [f"    {json.dumps(key)}: {json.dumps(value)}" for key, value in run.items()]
            listed = ",\n".join(f"      {json.dumps(m, separators=(',', ':'))}" for m in members)
            fields.append(f'    "members": [\n{listed}\n    ]' if members else '    "members": []')
            return "   {\n" + ",\n".join(fields) + "\n   }"

        data = self.model_dump()
        runs = ",\n".join(run_text(run) for run in data.pop("runs"))
        fields = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in data.items()]
        fields.append(f'  "runs": [\n{runs}\n  ]' if runs else '  "runs": []')
        return "{\n" + ",\n".join(fields) + "\n}\n"


def _repeated(values: list[str]) -> str | None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def parse(data: bytes, source: Path | str) -> Manifest:
    """The manifest in `data`, or a ManifestError naming `source` and what is wrong."""
    return versioned.parse(data, str(source), Manifest, version_key="manifest_version", readable=READABLE_VERSIONS,
                           noun="a manifest", error=ManifestError, unknown_field="not a field of a manifest",
                           not_json_hint="; a manifest is what `cctest archive` wrote")


def read(path: Path) -> Manifest:
    """The manifest at `path` (a regular file, bounded), or a ManifestError naming it."""
    return parse(versioned.read_bytes(path, MAX_MANIFEST_BYTES, "a manifest", ManifestError), path)


def archive_url(base_url: str, file: str) -> str:
    """The URL of an archive published under `base_url`."""
    from urllib.parse import quote

    return base_url.rstrip("/") + "/" + quote(file)
