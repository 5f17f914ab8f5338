"""Find and read run directories (docs/run-directory.md): the report's only input."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

TABLES = ("flows", "throughput", "ss", "tcp_probe", "qdisc", "cc_state", "ping")
REQUIRED = ("flows", "throughput")
ABSENT_NOTE = {
    "tcp_probe": "tcp_probe.parquet absent (bpftrace unavailable): per-ACK cwnd not shown",
    "cc_state": "cc_state.parquet absent: no variant internal state recorded",
    "qdisc": "qdisc.parquet absent: no bottleneck drops, queue occupancy or queue delay",
    "ss": "ss.parquet absent: no cwnd, RTT or srtt-based queueing delay",
    "ping": "ping.parquet absent: no base-RTT probes",
}


class ReportInputError(Exception):
    """Bad input: the message names the offending path."""


@dataclass
class Run:
    path: Path
    meta: dict
    checks: dict | None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    side: str | None = None  # "baseline" / "candidate" in a comparison

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)


def find_run_dirs(path: Path | str) -> list[Path]:
    """Run dirs at `path`: itself if it holds meta.json, else every dir below that does."""
    p = Path(path)
    if not p.exists():
        raise ReportInputError(f"{p}: no such file or directory")
    if not p.is_dir():
        raise ReportInputError(f"{p}: not a directory")
    if (p / "meta.json").exists():
        return [p]
    found = []
    for root, dirs, files in os.walk(p):
        dirs.sort()
        if "meta.json" in files:
            found.append(Path(root))
            dirs[:] = []  # a run dir's raw/ holds no runs
    if not found:
        raise ReportInputError(f"{p}: no run directories (no meta.json at any depth)")
    return found


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportInputError(f"{path}: unreadable ({e.__class__.__name__}: {e})") from None
    if not isinstance(data, dict):
        raise ReportInputError(f"{path}: unreadable (not a JSON object)")
    return data


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


def load_run(path: Path | str) -> Run:
    p = Path(path)
    meta = _read_json(p / "meta.json")
    notes = []
    checks = None
    if (p / "checks.json").exists():
        try:
            checks = _read_json(p / "checks.json")
        except ReportInputError as e:  # the verdict is shown, but its absence is not fatal
            notes.append(f"{e}; no emulation-health verdict")
    else:
        notes.append("checks.json absent: no emulation-health verdict")
    if not isinstance(meta.get("flows", []), list) or not isinstance(meta.get("link", {}) or {}, dict):
        raise ReportInputError(f"{p / 'meta.json'}: unreadable (flows must be a list, link an object)")
    run = Run(p, meta, checks, notes=notes)
    if meta.get("status") not in (None, "ok"):
        run.notes.append(f"run status {meta.get('status')}: {meta.get('error') or 'no error message'}")
    for name in TABLES:
        f = p / f"{name}.parquet"
        if not f.exists():
            if name in REQUIRED:
                run.notes.append(f"{name}.parquet absent: throughput metrics unavailable")
            elif name in ABSENT_NOTE:
                run.notes.append(ABSENT_NOTE[name])
            continue
        try:
            run.tables[name] = _tidy(pd.read_parquet(f))
        except Exception as e:  # a corrupt table must not sink the whole report
            run.notes.append(f"{f}: unreadable ({e.__class__.__name__}); skipped")
    return run


def load_runs(paths) -> list[Run]:
    dirs: list[Path] = []
    for p in paths:
        for d in find_run_dirs(p):
            if d.resolve() not in {x.resolve() for x in dirs}:
                dirs.append(d)
    return [load_run(d) for d in dirs]
