"""Run directories measured and judged: the metrics of every run, their summary across runs, and the
claims' verdicts. `cctest check` writes these; `cctest report` draws them (report/build.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..model.metric_table import RunMetrics
from . import metrics
from .claims import Verdict, expectations_of_experiments, judge_all
from .defaults import DEFAULT_JAIN_WINDOW_S, DEFAULT_SKIP_S
from .load import ReportInputError, Run, find_run_dirs, shown
from .run_claims import expectations_of_runs
from .run_point import points_of
from .summary import Summary, summarize


@dataclass
class Measure:
    """How runs are measured: the throughput bin, the start of the steady state, the Jain window."""

    bin_ms: float | None = None  # None: derived.default_bin_s per run (one RTT, at least 100 ms)
    skip_s: float = DEFAULT_SKIP_S
    jain_window_s: float = DEFAULT_JAIN_WINDOW_S


def analyse(runs: list[Run], opts: Measure, skipped: list[str]) -> tuple[list[Run], list[RunMetrics], Summary]:
    """Metrics of every run; a run whose data the metrics cannot use is named in `skipped` and left
    out, so that one malformed run never sinks the report of the others."""
    kept: list[Run] = []
    results: list[RunMetrics] = []
    for run in runs:
        if run.recorded is not None:
            kept.append(run)
            results.append(recorded_metrics(run, opts))
            continue
        try:
            res = metrics.run_metrics(run.record, run.tables, bin_s=opts.bin_ms / 1000.0 if opts.bin_ms else None,
                                      skip_s=opts.skip_s)
            if opts.jain_window_s != DEFAULT_JAIN_WINDOW_S and len(res.series.get("binned", [])):
                res.series["jain"] = metrics.jain_series(res.series["binned"], opts.jain_window_s)
        except Exception as e:  # noqa: BLE001 - named in the report and on stderr instead
            skipped.append(f"{shown(run.path)}: could not be analysed ({type(e).__name__}: {e}); run skipped")
            continue
        kept.append(run)
        results.append(res)
    if runs and not kept:
        raise ReportInputError(skipped[-1])
    return kept, results, summarize(kept, results)


def recorded_metrics(run: Run, opts: Measure) -> RunMetrics:
    """A compact record's metrics; bad input when the options ask for another bin or steady start
    than it was measured with (only the run directory can answer those)."""
    recorded = run.recorded
    assert recorded is not None
    m = recorded.metrics
    if m.skip_s != opts.skip_s or m.bin_ms != opts.bin_ms:
        asked = f"--skip-s {opts.skip_s:g}" if m.skip_s != opts.skip_s else f"--bin-ms {opts.bin_ms:g}"
        kept = f"--skip-s {m.skip_s:g}" + (f" and --bin-ms {m.bin_ms:g}" if m.bin_ms else " and the default bin")
        raise ReportInputError(f"{shown(run.path)}: a compact record, measured with {kept}; {asked} needs the "
                               "full run directory (or records made with it)")
    return m.result(recorded.steady)


@dataclass
class Claims:
    """Whose claims judge the runs: an experiments file's (`known:` included), or, with `file` None,
    those recorded with the runs (their scenario.yaml, for run directories from elsewhere)."""

    file: str | None = "experiments.yaml"
    every_scenario: bool = False  # the file's claims of scenarios with no run too (as not run)
    why: str = "--recorded-claims"  # why the recorded claims judge, when they do

    def describe(self) -> str:
        """The first line `check` and `report` print: which claims judge the runs."""
        if self.file is None:
            return f"judging the runs with the claims recorded in their scenario.yaml ({self.why})"
        return f"judging the runs with the claims of {self.file} (known: included)"

    def expectations(self, runs: list[Run]) -> tuple[list, list[str]]:
        """The claims to judge and notes on any that could not be read; for the file's claims, those
        of scenarios the runs belong to (every scenario's with every_scenario)."""
        if self.file is None:
            return expectations_of_runs(runs)
        from ..model.scenario import load_experiments

        ran = {run.record.scenario for run in runs}
        claims = expectations_of_experiments(load_experiments(self.file))
        return [e for e in claims if self.every_scenario or e.scenario in ran], []


def judge_claims(runs: list[Run], results: list[RunMetrics], expectations: list | None = None,
                 claims: Claims | None = None) -> tuple[list[Verdict], list[str]]:
    """The claims (`claims`, default: the recorded ones; or the given expectations), judged on the
    runs' metrics (`results`: run_metrics of each run, whose series let a claim re-measure its
    steady window)."""
    notes: list[str] = []
    if expectations is None:
        expectations, notes = (claims or Claims(None)).expectations(runs)
    return judge_all(expectations, points_of(runs, results)), notes




def run_dirs_of(paths: Iterable[Path | str]) -> list[Path]:
    """The run directories under `paths`, for the outputs' check (loading names the problems)."""
    found = []
    for p in paths:
        try:
            found += find_run_dirs(p)
        except ReportInputError:
            continue
    return found


