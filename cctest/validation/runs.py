"""Run directories -> the rows the comparison reads: cell, cc, engine, kernel, repetition, seed and
the flow's goodput. Runs are found and read as `cctest report` reads them (analysis/load.py).

A run belongs to the comparison when it is one flow of BBR or CUBIC alone, without random loss or
an AQM, on a link whose (buffer, rate, RTT) is a cell of the testbed's table; any other run under
the paths given is counted and left aside. Goodput is the receiver's byte total over the flow's
active time (metrics.flow_totals), as the testbed's iperf3 summary line gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.load import ReportInputError, Run, find_run_dirs, load_run
from ..analysis.metrics import goodput_mbps
from ..model.record import Link, RunRecord
from ..report.reproduction import engine_of
from .gains import CCS, RunRow
from .testbed import Cell


@dataclass
class Found:
    rows: list[RunRow] = field(default_factory=list)
    other: int = 0  # run directories that are not one of the table's cells
    unreadable: list[str] = field(default_factory=list)  # one line each


def cell_of(record: RunRecord, cells: set[Cell]) -> tuple[Cell, str] | None:
    """The run's cell and cc, or None when the run is not one of the table's."""
    link, flows = record.link or Link(), record.flows or []
    cc = flows[0].cc if len(flows) == 1 else None
    if cc is None or cc not in CCS:
        return None
    if (link.loss_pct or 0) != 0 or (link.aqm or "fifo") != "fifo" or link.rate_schedule:
        return None
    if link.buffer_bytes is None or link.rate_mbps is None or link.rtt_ms is None:
        return None
    cell = Cell(int(link.buffer_bytes), float(link.rate_mbps), float(link.rtt_ms))
    return (cell, cc) if cell in cells else None


def left_out(run: Run) -> str:
    if run.record.status not in (None, "ok"):
        return f"status {run.record.status}"
    if (run.checks or {}).get("verdict") == "fail":
        return "health failed"
    return ""


def read(paths: list[Path], cells: set[Cell]) -> Found:
    """Every run of the table's cells under `paths` (run directories or directories holding them)."""
    found = Found()
    seen: set[Path] = set()
    for path in paths:
        for run_dir in find_run_dirs(path):
            if run_dir.resolve() in seen:
                continue
            seen.add(run_dir.resolve())
            try:
                run = load_run(run_dir)
            except ReportInputError as error:  # one unreadable run must not hide the rest
                found.unreadable.append(f"{run_dir}: {error}")
                continue
            record = run.record
            which = cell_of(record, cells)
            if which is None:
                found.other += 1
                continue
            found.rows.append(RunRow(
                run_id=run.run_id, cell=which[0], cc=which[1], engine=engine_of(record),
                kernel=str((record.kernel.release if record.kernel else None) or "unknown"),
                repetition=int(record.repetition or 0), seed=int(record.seed or 0),
                goodput_mbps=goodput_mbps(run), left_out=left_out(run)))
    return found
