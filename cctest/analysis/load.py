"""Find and read run directories (docs/run-directory.md): the report's only input."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..base.errors import BadInput
from ..base.safeload import Refused
from ..host import captures
from ..model import runfiles
from ..model.compact import RECORD_FILE, CompactRecord, CompactRecordError, read
from ..model.record import RecordError, RunRecord, link_numbers_from_text, read_record

REQUIRED = ("flows", "throughput")
ABSENT_NOTE = {
    "tcp_probe": "tcp_probe.parquet absent (bpftrace unavailable): per-ACK cwnd not shown",
    "cc_state": "cc_state.parquet absent: no variant internal state recorded",
    "qdisc": "qdisc.parquet absent: no bottleneck drops, queue occupancy or queue delay",
    "ss": "ss.parquet absent: no cwnd, RTT or srtt-based queueing delay",
    "ping": "ping.parquet absent: no base-RTT probes",
}


# The columns the report reads from each table and which must be numbers, as each capture declares
# them (Capture.required_columns, number_columns): a table that lacks them (another table's file in
# its place, an old format) is skipped with a note.
SCHEMA = {table: (set(capture.required_columns[table]), set(capture.number_columns[table]))
          for capture in captures.REGISTRY for table in capture.required_columns}
# Columns every row is placed or grouped by: a NaN or infinity there has no meaning.
FINITE = ("flow", "t_s", "interval_s")
FINITE_IN = {"throughput": ("bytes",)}  # a sample without its bytes is no sample
# The captures' tables the report reads: those with required columns (not cpu: checks.json judges it).
TABLES = tuple(name for name in captures.TABLES if name in SCHEMA)
RUN_DIR_SIGNS = ("scenario.yaml", "raw", "flows.parquet", "throughput.parquet", "checks.json")


class ReportInputError(BadInput):
    """Bad input: the message names the offending path."""


@dataclass
class Run:
    path: Path
    record: RunRecord  # meta.json
    checks: dict | None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    side: str | None = None  # "baseline" / "candidate" in a comparison
    recorded: CompactRecord | None = None  # read from a compact record: its metrics stand for the tables

    @property
    def run_id(self) -> str:
        return shown(self.record.run_id or self.path.name)


def shown(path: Path | str) -> str:
    """A path as text that any page or file can hold: bytes that are not UTF-8 become U+FFFD."""
    return os.fsencode(path).decode("utf-8", errors="replace")


def is_run(names: Collection[str]) -> bool:
    """Whether a directory holding `names` is a run: a run directory (meta.json) or its compact
    record (record.json)."""
    return "meta.json" in names or RECORD_FILE in names


def find_run_dirs(path: Path | str, skipped: list[str] | None = None) -> list[Path]:
    """Run dirs at `path`: itself if it holds meta.json (or a compact record), else every dir below
    that does. Directories that look like run dirs but lack meta.json are named in `skipped` (when
    given)."""
    p = Path(path)
    if not p.exists():
        raise ReportInputError(f"{shown(p)}: no such file or directory")
    if not p.is_dir():
        raise ReportInputError(f"{shown(p)}: not a directory")
    if os.path.lexists(p / "meta.json") or os.path.lexists(p / RECORD_FILE):
        return [p]
    found, headless = [], []
    for root, names in walk_dirs(p):
        if is_run(names):
            found.append(root)
        elif any(sign in names for sign in RUN_DIR_SIGNS):
            headless.append(root)
    if skipped is not None:
        skipped += [f"{shown(d)}: a run directory without meta.json; skipped" for d in headless]
    if not found:
        what = f" ({len(headless)} without meta.json, e.g. {shown(headless[0])})" if headless else ""
        raise ReportInputError(f"{shown(p)}: no run directories (no meta.json at any depth){what}")
    return found


def walk_dirs(top: Path) -> Iterator[tuple[Path, set[str]]]:
    """(directory, names in it) below `top`, depth first in name order, without following links,
    without descending into a run directory (a run's raw/ holds no runs) nor into a hidden one (a
    UML guest's home under --out holds its run while the run is still being made; .git and caches
    hold none). Iterative: a tree of any depth, where os.walk's recursion stops at Python's limit."""
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable or vanished: nothing below it is found, as with os.walk
        names = {e.name for e in entries}
        yield folder, names
        if is_run(names) or any(sign in names for sign in RUN_DIR_SIGNS):
            continue
        stack += reversed([Path(e.path) for e in entries
                           if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")])


def _read_json(run_dir: Path, name: str) -> dict | None:
    """A run's JSON object (None when absent), read by the one reader of run directories."""
    path = run_dir / name
    try:
        data = runfiles.read_json(run_dir, name)
    except Refused as e:
        raise ReportInputError(f"{shown(path)}: unreadable ({str(e).removeprefix(f'{path}: ')})") from None
    if data is not None and not isinstance(data, dict):
        raise ReportInputError(f"{shown(path)}: unreadable (not a JSON object)")
    return data


def checks_problem(checks: dict) -> str | None:
    if not isinstance(checks.get("verdict"), (str, type(None))):
        return "verdict must be text"
    items = checks.get("checks", [])
    if not isinstance(items, list) or not all(isinstance(c, dict) for c in items):
        return "checks must be a list of objects"
    return None


def table_problem(name: str, df: pd.DataFrame) -> str | None:
    """Why `df` is not a `name` table the report can use, or None."""
    required, numeric = SCHEMA[name]
    missing = sorted(required - set(df.columns))
    if missing:
        return f"not a {name} table (lacks {', '.join(missing)})"
    for col in sorted(numeric & set(df.columns)):
        if not pd.api.types.is_numeric_dtype(df[col].dtype) or pd.api.types.is_bool_dtype(df[col].dtype):
            return f"column {col} is not numeric"
    for col in FINITE + FINITE_IN.get(name, ()):
        if col in df.columns and len(df) and not np.isfinite(df[col].to_numpy(dtype="float64")).all():
            return f"column {col} holds NaN or infinity"
    for col in sorted(numeric & set(df.columns)):
        if len(df) and np.isinf(df[col].to_numpy(dtype="float64")).any():
            return f"column {col} holds infinity"
    return None


def _tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Drop the constant run_id column and make string columns plain Python objects: pyarrow-backed
    strings are slow to group and filter on, and every analysis here works per run anyway."""
    df = df.drop(columns=["run_id"], errors="ignore")
    for c in df.columns:
        dt = df[c].dtype
        if pd.api.types.is_bool_dtype(dt):
            continue
        if pd.api.types.is_numeric_dtype(dt):
            if isinstance(dt, pd.api.extensions.ExtensionDtype):  # Int64/Float64 with <NA>
                df[c] = df[c].astype("float64")
        else:
            df[c] = df[c].astype(object)
    return df


def _read_checks(p: Path, notes: list[str]) -> dict | None:
    """checks.json, or None with a note: the verdict is shown, but its absence is not fatal."""
    try:
        checks = _read_json(p, "checks.json")
        if checks is None:
            notes.append("checks.json absent: no emulation-health verdict")
            return None
        problem = checks_problem(checks)
        if problem:
            raise ReportInputError(f"{shown(p / 'checks.json')}: unreadable ({problem})")
        return checks
    except ReportInputError as e:
        notes.append(f"{e}; no emulation-health verdict")
        return None


def _load_table(run: Run, name: str) -> None:
    """The run's `name` table into run.tables, or a note saying why it is not there."""
    f = run.path / f"{name}.parquet"
    try:
        table = runfiles.read_table(run.path, name)
    except Refused as e:  # a link, a FIFO, a device, a footer claiming more than the file holds
        run.notes.append(f"{e}; skipped")
        return
    except Exception as e:  # noqa: BLE001 - a corrupt table must not sink the whole report
        run.notes.append(f"{shown(f)}: unreadable ({e.__class__.__name__}); skipped")
        return
    if table is None:
        if name in REQUIRED:
            run.notes.append(f"{name}.parquet absent: throughput metrics unavailable")
        elif name in ABSENT_NOTE:
            run.notes.append(ABSENT_NOTE[name])
        return
    table = _tidy(table)
    problem = table_problem(name, table)
    if problem:
        run.notes.append(f"{shown(f)}: {problem}; skipped")
        if name in REQUIRED:
            run.notes.append(f"{name}.parquet unusable: throughput metrics unavailable")
        return
    run.tables[name] = table


def load_run(path: Path | str) -> Run:
    p = Path(path)
    if not os.path.lexists(p / "meta.json") and os.path.lexists(p / RECORD_FILE):
        return load_record(p)
    data = _read_json(p, "meta.json")
    if data is None:
        raise ReportInputError(f"{shown(p / 'meta.json')}: no such file")
    data, notes = link_numbers_from_text(data)
    try:
        record = read_record(data, shown(p / "meta.json"))
    except RecordError as e:
        raise ReportInputError(str(e)) from None
    run = Run(p, record, _read_checks(p, notes), notes=notes)
    if record.status not in (None, "ok"):
        run.notes.append(f"run status {record.status}: {record.error or 'no error message'}")
    for name in TABLES:
        _load_table(run, name)
    flows = run.tables.get("flows")
    if flows is not None and "totals_from" in flows.columns:
        from_ss = sorted(int(f) for f in flows.loc[flows["totals_from"] == "ss", "flow"])
        if from_ss:
            run.notes.append(f"flow(s) {', '.join(map(str, from_ss))}: iperf3 left no results (killed before it "
                             "exited); their byte totals and throughput come from ss (bytes acknowledged, at "
                             "each ss sample)")
    return run


def load_record(path: Path) -> Run:
    """A run from its compact record: meta.json, checks and notes as recorded, no tables."""
    try:
        recorded = read(path)
        record = read_record(recorded.meta, shown(path / RECORD_FILE) + " (meta)")
    except (CompactRecordError, RecordError) as e:
        raise ReportInputError(str(e)) from None
    checks = recorded.checks
    problem = checks_problem(checks) if checks is not None else None
    if problem:
        raise ReportInputError(f"{shown(path / RECORD_FILE)}: unreadable (checks: {problem})")
    return Run(path, record, checks, notes=list(recorded.notes), recorded=recorded)


def load_runs(paths: Iterable[Path | str], skipped: list[str] | None = None) -> list[Run]:
    """Every run under `paths`. With `skipped` given, a run that cannot be read is named there and
    left out (the report shows the rest); without, or when no run at all can be read, it is an error."""
    dirs: dict[Path, Path] = {}  # resolved -> as found: a run named twice (by two paths) is read once
    for p in paths:
        for d in find_run_dirs(p, skipped):
            dirs.setdefault(d.resolve(), d)
    runs, errors = [], []
    for d in dirs.values():
        try:
            runs.append(load_run(d))
        except ReportInputError as e:
            if skipped is None:
                raise
            errors.append(str(e))
    if errors and not runs:
        more = f" (and {len(errors) - 1} more run(s) unreadable)" if len(errors) > 1 else ""
        raise ReportInputError(errors[0] + more)
    if skipped is not None:
        skipped += [f"{e}; run skipped" for e in errors]
    return runs
