"""The one reader of a run directory's files (meta.json, checks.json, scenario.yaml, raw/ and the
tables), for every command that opens them: `report`, `check`, `ingest`.

Run directories travel (tarballs, git, shared disks) and `cctest check` gates CI over runs it did
not make, often as root. So a file of a run is read only when it is the run's own:

* no symbolic link is followed below the run directory: each component is opened relative to its
  parent's descriptor with O_NOFOLLOW, so `scenario.yaml -> /etc/shadow` or `raw -> /` is refused
  and nothing outside the run is read (the run directory itself may be a link the user named);
* only regular files: a FIFO would block forever, /dev/zero never ends (safeload.check_regular);
* bounded sizes, checked before a byte is parsed;
* a table's rows and columns taken from its parquet footer before it is loaded: a small file that
  claims millions of rows of one repeated value would otherwise decode to gigabytes.

Every refusal is a safeload.Refused (bad input, exit 2) whose message names the file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..base.safeload import READ_FLAGS, Refused, check_regular, decode_utf8, kind_of, load_yaml, read_open

if TYPE_CHECKING:
    import pandas as pd

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
MAX_JSON_BYTES = 16 << 20  # meta.json and checks.json are kilobytes: a bound, not a limit any run meets
MAX_TABLE_BYTES = 8 << 30  # hours of per-ACK tracing stay far below
MAX_TABLE_CELLS = 200_000_000  # rows x columns: 1.6 GB of float64, ten times the longest capture's
CELLS_PER_BYTE = 64  # real tables hold under 2 cells per byte of file; 64 leaves room for any real
# compression and refuses a file whose footer claims far more data than it carries
MIN_TABLE_CELLS = 1_000_000  # a small table never trips the ratio


def _refuse_open(run_dir: Path, relative: str, error: OSError) -> Refused:
    """Why opening `relative` failed, in a reader's words (a link is named as such)."""
    if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        try:
            mode = os.lstat(run_dir / relative).st_mode
            if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
                return Refused(f"is {kind_of(mode)}; a run directory's files are regular files of its own, "
                               "never links")
        except OSError:
            pass
        return Refused("passes through a symbolic link or a file; a run directory's folders are its own")
    return Refused(f"cannot read ({error.strerror})")


def open_in_run(run_dir: Path | str, relative: str) -> int:
    """A descriptor of `relative` (e.g. "meta.json", "raw/ss.jsonl") inside `run_dir`, opened one
    component at a time without following links; FileNotFoundError when absent, Refused otherwise."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("", ".", "..", "/") for part in parts):
        raise Refused(f"{relative!r} is not a file name inside a run directory")
    folder = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in parts[:-1]:
            inner = os.open(part, DIR_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], READ_FLAGS | os.O_NOFOLLOW, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise _refuse_open(Path(run_dir), relative, error) from None
    finally:
        os.close(folder)


def _named(run_dir: Path | str, relative: str, error: Refused) -> Refused:
    return Refused(f"{Path(run_dir) / relative}: {error}")


def read_bytes(run_dir: Path | str, relative: str, max_bytes: int, what: str) -> bytes | None:
    """The bytes of a run's file, None when it is absent; Refused (naming the file) when it is a
    link, no regular file, larger than `max_bytes` or unreadable."""
    try:
        return read_open(open_in_run(run_dir, relative), max_bytes, what)
    except FileNotFoundError:
        return None
    except Refused as error:
        raise _named(run_dir, relative, error) from None


def read_json(run_dir: Path | str, relative: str, what: str | None = None) -> Any:
    """A run's JSON file as data (None when absent); Refused when it is no JSON."""
    import json

    data = read_bytes(run_dir, relative, MAX_JSON_BYTES, what or f"a {PurePosixPath(relative).name}")
    if data is None:
        return None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _named(run_dir, relative, Refused(f"not JSON ({error.__class__.__name__}: {error})")) from None


def read_yaml(run_dir: Path | str, relative: str, max_bytes: int, what: str) -> Any:
    """A run's YAML file, built by the bounded loader of experiments files (None when absent)."""
    data = read_bytes(run_dir, relative, max_bytes, what)
    if data is None:
        return None
    try:
        return load_yaml(decode_utf8(data))
    except Refused as error:
        raise _named(run_dir, relative, error) from None


def check_table_size(rows: int, columns: int, file_bytes: int) -> None:
    """Refuse a table whose footer claims more cells than a file of its size carries, or than
    memory holds."""
    cells = rows * max(columns, 1)
    allowed = min(MAX_TABLE_CELLS, max(MIN_TABLE_CELLS, CELLS_PER_BYTE * file_bytes))
    if cells > allowed:
        raise Refused(f"claims {rows} rows x {columns} columns in {file_bytes} bytes; a table holds at most "
                      f"{allowed} values at this size (at most {CELLS_PER_BYTE} per byte, {MAX_TABLE_CELLS} in all)")


def read_table(run_dir: Path | str, name: str) -> pd.DataFrame | None:
    """`<name>.parquet` of a run as a DataFrame, None when absent; Refused when it is a link, no
    regular file, or larger (by its footer) than its bytes can hold. A file pyarrow cannot read
    raises pyarrow's error, for the caller to note."""
    import pandas as pd
    import pyarrow.parquet as pq

    relative = f"{name}.parquet"
    try:
        fd = open_in_run(run_dir, relative)
    except FileNotFoundError:
        return None
    except Refused as error:
        raise _named(run_dir, relative, error) from None
    with os.fdopen(fd, "rb") as f:
        try:
            size = check_regular(fd, MAX_TABLE_BYTES, f"a {name} table").st_size
            meta = pq.ParquetFile(f).metadata
            check_table_size(meta.num_rows, meta.num_columns, size)
        except Refused as error:
            raise _named(run_dir, relative, error) from None
        f.seek(0)
        return pd.read_parquet(f)


def table_present(run_dir: Path | str, name: str) -> bool:
    """Whether the run has a `<name>.parquet` entry at all (of whatever kind: read_table judges it)."""
    return os.path.lexists(Path(run_dir) / f"{name}.parquet")
