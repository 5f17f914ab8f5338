"""A suite's readings tables (suites.Readings) measured: each row's term over each column's runs.

A cell is judged on what a claim at that point would be: the scenario's declared repetitions
(indices 0 to n-1), runs whose health did not fail, the term as claims evaluate it; it shows the mean
with its 95 % Student-t interval and n, or nothing where no run is there. Runs of two builds in one
cell are refused, as a claim's point refuses them (claims.MixedRuns).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import claim_language
from ..model.suites import Readings, with_cc
from .claims import MixedRuns, matches, term_value
from .run_point import RunPoint
from .stats import mean_ci95


@dataclass(frozen=True)
class Cell:
    mean: float
    half_width: float  # NaN with fewer than two runs
    n: int


def _selected(points: list[RunPoint], scenario: str, where: dict[str, Any], repetitions: int | None) -> list[RunPoint]:
    chosen = []
    for run in points:
        if run.scenario != scenario or run.health == "fail":
            continue
        if repetitions is not None and (run.repetition is None or not 0 <= run.repetition < repetitions):
            continue
        if all(key in run.matrix and matches(run.matrix[key], wanted if isinstance(wanted, list) else [wanted])
               for key, wanted in where.items()):
            chosen.append(run)
    return chosen


def cell(term: str, runs: list[RunPoint]) -> Cell | None:
    """`term` (a claim-language operand, CC already replaced) over `runs`; None when none measured it."""
    operand = claim_language.parse(f"{term} > 0").operands[0]

    def value(run: RunPoint) -> float:
        return claim_language.evaluate(operand, lambda node: term_value(node, run))

    values = [v for v in map(value, runs) if math.isfinite(v)]
    if not values:
        return None
    mean, half, n = mean_ci95(values)
    return Cell(mean, half, n)


def measure(table: Readings, points: list[RunPoint], repetitions: Mapping[str, int | None]) -> list[list[Cell | None]]:
    """Per row, per column: the cell (`repetitions`: each scenario's declared n)."""
    cells = []
    for row in table.rows:
        line = []
        for column in table.columns:
            runs = _selected(points, column.scenario, {**column.where, **row.where}, repetitions.get(column.scenario))
            builds = sorted({f"{run.engine_build}; {run.module_builds}" for run in runs})
            if len(builds) > 1:
                raise MixedRuns(f"readings {table.title!r}, {column.label}, {row.label}: runs of {column.scenario} "
                                f"of two builds ({builds[0]} and {builds[1]}); give the runs of one")
            line.append(cell(with_cc(row.term, column.cc), runs))
        cells.append(line)
    return cells
