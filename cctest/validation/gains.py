"""BBR's goodput gain over CUBIC per cell, ours beside the testbed's, and the agreement figures. Pure.

The testbed's gain is 100 x (G_bbr - G_cubic) / G_cubic with G the goodput of one flow alone
(its replication computes it from the mean goodputs of 5 trials). Ours pairs the BBR and the CUBIC
run of one repetition (the suite gives both the seed 1 + r, so both saw the same randomness),
takes that pair's gain, and reports the mean and 95 % Student-t interval over the pairs: the
spread of a gain, not of two goodputs. A run left out (failed health, not finished) leaves its
partner unpaired; an unpaired run adds nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis.stats import mean_ci95
from .testbed import Cell

CCS = ("bbr", "cubic")
AGREE_POINTS = 5.0  # a cell agrees when ours is within this many percentage points of the testbed's
SIGN_FROM = 5.0  # the sign is compared only where the testbed's |gain| is at least this (else noise)
WORST_SHOWN = 5  # the cells that disagree most, listed in the summary


@dataclass(frozen=True)
class RunRow:
    """One run of the peer suite as the comparison needs it."""

    run_id: str
    cell: Cell
    cc: str
    engine: str
    kernel: str
    repetition: int
    seed: int
    goodput_mbps: float  # NaN: no goodput could be read
    left_out: str = ""  # why the run is not used (failed health, status), or ""


@dataclass
class CellResult:
    cell: Cell
    testbed: float
    engine: str  # "" when no engine ran the cell
    gains: list[float] = field(default_factory=list)  # one per BBR/CUBIC pair
    kernels: tuple[str, ...] = ()
    left_out: int = 0  # runs left out for their health or status
    unpaired: int = 0  # usable runs without a partner of the other cc

    @property
    def n(self) -> int:
        return len(self.gains)

    @property
    def mean_ci(self) -> tuple[float, float]:
        mean, ci, _ = mean_ci95(self.gains)
        return mean, ci

    @property
    def diff(self) -> float:
        """Ours minus the testbed's, in percentage points; NaN when not run."""
        return self.mean_ci[0] - self.testbed if self.n else float("nan")


def gain_pct(bbr_mbps: float, cubic_mbps: float) -> float:
    if not (math.isfinite(bbr_mbps) and math.isfinite(cubic_mbps)) or cubic_mbps <= 0:
        return float("nan")
    return 100.0 * (bbr_mbps - cubic_mbps) / cubic_mbps


def pair(rows: list[RunRow]) -> list[tuple[RunRow, RunRow]]:
    """BBR and CUBIC runs of one cell and engine with the same repetition and seed. A repetition run
    twice (two result directories) counts once: the later run (run ids start with their time)."""
    latest: dict[tuple, RunRow] = {}
    for row in sorted(rows, key=lambda r: r.run_id):
        if not row.left_out and math.isfinite(row.goodput_mbps):
            latest[(row.cell, row.engine, row.repetition, row.seed, row.cc)] = row
    pairs = []
    for (cell, engine, repetition, seed, cc), bbr in latest.items():
        cubic = latest.get((cell, engine, repetition, seed, "cubic"))
        if cc == "bbr" and cubic is not None:
            pairs.append((bbr, cubic))
    return sorted(pairs, key=lambda p: (p[0].cell, p[0].engine, p[0].repetition))


def compare(testbed: dict[Cell, float], rows: list[RunRow]) -> list[CellResult]:
    """One result per cell and engine that ran it; a cell no engine ran is one result with n = 0.
    Cells in the testbed's order, engines by name."""
    pairs = pair(rows)
    engines = sorted({r.engine for r in rows})
    out = []
    for cell, gain in testbed.items():
        mine = [r for r in rows if r.cell == cell]
        ran = [e for e in engines if any(r.engine == e for r in mine)]
        for engine in ran or [""]:
            theirs = [r for r in mine if r.engine == engine]
            gains = [gain_pct(b.goodput_mbps, c.goodput_mbps) for b, c in pairs
                     if b.cell == cell and b.engine == engine]
            used = {r.run_id for p in pairs if p[0].cell == cell and p[0].engine == engine for r in p}
            usable = [r for r in theirs if not r.left_out and math.isfinite(r.goodput_mbps)]
            out.append(CellResult(
                cell=cell, testbed=gain, engine=engine, gains=[g for g in gains if math.isfinite(g)],
                kernels=tuple(sorted({r.kernel for r in theirs})),
                left_out=sum(1 for r in theirs if r.left_out or not math.isfinite(r.goodput_mbps)),
                unpaired=sum(1 for r in usable if r.run_id not in used)))
    return out


@dataclass
class Summary:
    engine: str
    cells: int  # testbed cells compared
    measured: int  # of them, cells with at least one pair on this engine
    within: int  # measured cells within AGREE_POINTS
    sign_cells: int  # measured cells where the testbed's |gain| >= SIGN_FROM
    sign_agree: int  # of them, where our mean has the testbed's sign
    worst: list[CellResult]  # the measured cells that disagree most, largest |difference| first
    min_n: int  # the fewest pairs behind a measured cell

    @property
    def within_share(self) -> float:
        return self.within / self.measured if self.measured else float("nan")


def summarise(results: list[CellResult], engine: str, cells: int) -> Summary:
    measured = [r for r in results if r.engine == engine and r.n]
    signed = [r for r in measured if abs(r.testbed) >= SIGN_FROM]
    return Summary(
        engine=engine, cells=cells, measured=len(measured),
        within=sum(1 for r in measured if abs(r.diff) <= AGREE_POINTS),
        sign_cells=len(signed),
        sign_agree=sum(1 for r in signed if math.copysign(1, r.testbed) == math.copysign(1, r.mean_ci[0])
                       and r.mean_ci[0] != 0),
        worst=sorted(measured, key=lambda r: -abs(r.diff))[:WORST_SHOWN],
        min_n=min((r.n for r in measured), default=0))


def engines(results: list[CellResult]) -> list[str]:
    """Engines that measured at least one cell, the one with the most cells first."""
    counts: dict[str, int] = {}
    for r in results:
        if r.engine and r.n:
            counts[r.engine] = counts.get(r.engine, 0) + 1
    return sorted(counts, key=lambda e: (-counts[e], e))
