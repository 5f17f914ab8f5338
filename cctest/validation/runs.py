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
from ..report.reproduction import engine_of
from .gains import CCS, RunRow
from .testbed import Cell


@dataclass
class Found:
    rows: list[RunRow] = field(default_factory=list)
    other: int = 0  # run directories that are not one of the table's cells
    unreadable: list[str] = field(default_factory=list)  # one line each


def cell_of(meta: dict, cells: set[Cell]) -> tuple[Cell, str] | None:
    """The run's cell and cc, or None when the run is not one of the table's."""
    link, flows = meta.get("link") or {}, meta.get("flows") or []
    if len(flows) != 1 or flows[0].get("cc") not in CCS:
        return None
    if (link.get("loss_pct") or 0) != 0 or (link.get("aqm") or "fifo") != "fifo" or link.get("rate_schedule"):
        return None
    try:
        cell = Cell(int(link["buffer_bytes"]), float(link["rate_mbps"]), float(link["rtt_ms"]))
    except (KeyError, TypeError, ValueError):
        return None
    return (cell, flows[0]["cc"]) if cell in cells else None


def left_out(run: Run) -> str:
    if run.meta.get("status") not in (None, "ok"):
        return f"status {run.meta.get('status')}"
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
            which = cell_of(run.meta, cells)
            if which is None:
                found.other += 1
                continue
            meta = run.meta
            found.rows.append(RunRow(
                run_id=run.run_id, cell=which[0], cc=which[1], engine=engine_of(meta),
                kernel=str((meta.get("kernel") or {}).get("release") or "unknown"),
                repetition=int(meta.get("repetition") or 0), seed=int(meta.get("seed") or 0),
                goodput_mbps=goodput_mbps(run), left_out=left_out(run)))
    return found
