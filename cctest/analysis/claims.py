"""Paper claims as code: the `expect:` entries of a scenario, judged on measured runs. A claim's
language (how it is parsed, what it may name) is model/claim_language.py.

Judging (docs/papers.md, "Protocol"). A claim whose congestion controls all run in each selected
matrix point is judged per point: every repetition gives a margin (how far the comparison holds:
positive = holds), and the point passes when the 95 % Student-t interval of the margins lies on the
holding side, fails when it lies on the other, and is inconclusive when it straddles zero. Where a
side of the comparison is one bounded metric (a Jain index, a share: metric_table's `bounds`), its
interval is clipped to the metric's range before it is judged: the interval shown is the one judged.
A claim naming controls that run in different points (`retransmits(bbr_cws) <= 0.5 *
retransmits(bbr)` over a `flows.1.cc` sweep) is judged across points: each term is averaged over
the selected points where it was measured, per repetition index, and those margins (paired by
seed) are judged the same way.

The protocol, enforced here:
- Fixed n: a point is judged on exactly its scenario's declared `repetitions` runs, indices 0 to
  n-1. With fewer it is *incomplete (k of n)*, never passed; runs of higher indices (a point
  extended after the fact) are ignored, with a note: n is fixed before the data are seen.
- One build, one engine: the runs a verdict pools must have loaded the same build of every module
  (meta.json's modules[].sha256) and run on the same engine and kernel; a mix is refused
  (MixedRuns, exit 2), naming the two. So is a point with two runs of one repetition index.
- Health: runs whose checks.json verdict is *fail* are left out of the statistics, and a point that
  had any is *inconclusive*, naming the runs and their failing checks: a broken emulation neither
  confirms nor refutes a paper.
- `at_least_runs: K` (a race: which flow wins is a coin toss per run, and a mean of two outcomes
  describes no run): the point passes when the claim holds in at least K of its n runs, fails as
  soon as it cannot anymore, and shows every run's values.
- `at_least: K`: the claim holds when at least K of its selected points pass ("in most buffer
  cases"); without it every point must pass.
- `steady_from_s: S`: the steady-state terms (jain_steady, steady_share(cc), short_rtt_share) are
  measured from S seconds after time zero instead of the report's --skip-s.
- `sanity: true`: a check of our emulation or reading that no paper measured; judged and shown
  apart, never in the score.
- `known: {triage, reason}`: an expected failure. The claim's *status* (what `cctest check` gates
  on) is pass, fail, known-fail, unexpected-pass, inconclusive, incomplete or not-run; only fail
  and unexpected-pass change the exit code, so a gate over known failures goes red only when a
  result changed.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.errors import BadInput
from ..model.claim_language import (
    Claim,
    ClaimError,
    cc_of_call,
    evaluate,
    margins,
    metric_nodes,
    parse,
    steady_terms,
    term_name,
)
from ..model.metric_table import (
    BOUNDED_CC_TERMS,
    BOUNDED_RUN_TERMS,
    CC_TERMS,
    RUN_TERMS,
    STEADY_CC_TERMS,
    STEADY_RUN_TERMS,
)
from .stats import mean_ci95

if TYPE_CHECKING:  # imported where used: experiments.yaml's claims are parsed without pandas
    from ..model.scenario import Experiments
    from .run_point import RunPoint

# Why a claim fails, exactly one of: our code does not do what the specification says; the
# specification's reading of the paper; a setting the paper leaves unstated and we chose; the paper
# itself (only after its faithful readings and the calibrated baseline ran at its scale). A
# scaled-down setting is no triage: at the paper's scale a claim passes or fails.
TRIAGES = ("implementation", "spec", "setting", "paper")
# A claim's status, what `cctest check` reports and gates on (docs/experiments.md, "Claims"); GATE fails the run.
STATUSES = ("pass", "fail", "known-fail", "unexpected-pass", "inconclusive", "incomplete", "not-run")
GATE = ("fail", "unexpected-pass")


@dataclass(frozen=True)
class Known:
    """An expected failure: why the claim fails (one of TRIAGES) and the evidence in one line."""

    triage: str
    reason: str


@dataclass
class Expectation:
    """One `expect:` entry of a scenario, as recorded in its run directories."""

    scenario: str
    claim: Claim
    where: dict[str, list[Any]] = field(default_factory=dict)
    source: str = ""
    note: str = ""
    paper: str = ""  # the paper's own value, as it states it ("0.48", "about 0.9")
    known: Known | None = None
    at_least: int | None = None  # points that must pass (default: all)
    steady_from_s: float | None = None  # steady-state terms measured from here (default: --skip-s)
    tags: tuple[str, ...] = ()
    repetitions: int | None = None  # the scenario's declared n; None: every run is judged
    at_least_runs: int | None = None  # a race: runs of a point in which the claim must hold
    sanity: bool = False  # no paper measured it: judged, shown apart, never scored

    @property
    def scored(self) -> bool:
        """In the reproduction score: a claim of a paper-scale suite scenario (tag paper-*, none
        quick-*) that a paper measured (not a sanity check)."""
        return (any(t.startswith("paper-") for t in self.tags) and not any(t.startswith("quick-") for t in self.tags)
                and not self.sanity)

    @classmethod
    def from_entry(cls, scenario: str, entry: dict, tags: tuple[str, ...] = (),
                   repetitions: int | None = None) -> Expectation:
        where = {k: v if isinstance(v, list) else [v] for k, v in (entry.get("where") or {}).items()}
        known = entry.get("known")
        if known is not None:
            if not isinstance(known, dict) or known.get("triage") not in TRIAGES or not known.get("reason"):
                raise ClaimError(f"known: needs triage (one of {', '.join(TRIAGES)}) and a reason")
            known = Known(str(known["triage"]), str(known["reason"]))
        at_least = entry.get("at_least")
        steady = entry.get("steady_from_s")
        runs = entry.get("at_least_runs")
        return cls(scenario, parse(entry["claim"]), where, str(entry.get("source") or ""),
                   str(entry.get("note") or ""), str(entry.get("paper") or ""), known,
                   int(at_least) if at_least is not None else None,
                   float(steady) if steady is not None else None, tuple(tags),
                   int(repetitions) if repetitions is not None else None,
                   int(runs) if runs is not None else None, bool(entry.get("sanity")))


@dataclass
class Verdict:
    expectation: Expectation
    point: str  # the matrix point's label, or "across points"
    verdict: str  # pass, fail, inconclusive, incomplete, no data, not run
    margin: tuple[float, float, int]  # mean, 95 % CI half-width, n (worst comparison of a chain)
    values: dict[str, tuple[float, float, int]]  # each non-constant operand: mean, CI, n
    reason: str = ""
    unhealthy: list[str] = field(default_factory=list)  # runs left out: "run_id (check, check)"
    # The intervals judged, as shown: a bounded term's clipped to its range ((lo, hi) by operand
    # text); a comparison of two terms by its seed-paired margin ((mean, lo, hi, n) by comparison).
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    paired: dict[str, tuple[float, float, float, int]] = field(default_factory=dict)
    # A race (at_least_runs): each run's repetition, its operands' values and whether the claim held.
    runs: list[tuple[Any, dict[str, float], bool]] = field(default_factory=list)

    def measured(self) -> str:
        if self.runs:
            return self._per_run()
        parts = []
        for text, (mean, ci, n) in self.values.items():
            if n == 0:
                continue
            if any(text in label for label in self.paired):
                ci_text = ""  # judged on the paired margin below, not on its own interval
            elif not math.isnan(ci) and text in self.intervals and (lo_hi := self.intervals[text]) != (mean - ci,
                                                                                                   mean + ci):
                ci_text = f" [{lo_hi[0]:.3g}, {lo_hi[1]:.3g}]"
            else:
                ci_text = f" ± {ci:.3g}" if not math.isnan(ci) else ""
            parts.append(f"{text} = {mean:.3g}{ci_text} (n={n})")
        for label, (mean, lo, hi, n) in self.paired.items():
            interval = f" [{lo:.3g}, {hi:.3g}]" if n > 1 else ""
            parts.append(f"margin of {label} = {mean:.3g}{interval} (seed-paired, n={n})")
        return "; ".join(parts) or self.reason

    def _per_run(self) -> str:
        shown = []
        for rep, values, holds in self.runs:
            terms = ", ".join(f"{v:.3g}" for v in values.values())
            shown.append(f"r{rep} {terms} {'holds' if holds else 'fails'}")
        names = ", ".join(self.values)
        wins = sum(holds for _, _, holds in self.runs)
        e = self.expectation
        of = e.repetitions if e.repetitions is not None else len(self.runs)
        return f"{names} per run: {'; '.join(shown)} ({wins} of {of} hold, {e.at_least_runs} needed)"

    def as_dict(self) -> dict:
        """As claims.json has it (NaN stays NaN here: the writer makes it null, as for summary.json)."""
        e = self.expectation
        return {"scenario": e.scenario, "claim": e.claim.text, "where": e.where, "source": e.source,
                "note": e.note, "point": self.point, "verdict": self.verdict,
                "margin": {"mean": self.margin[0], "ci95": self.margin[1], "n": self.margin[2]},
                "values": {k: {"mean": m, "ci95": c, "n": n} for k, (m, c, n) in self.values.items()},
                "intervals": {k: list(v) for k, v in self.intervals.items()},
                "paired_margins": {k: {"mean": m, "low": lo, "high": hi, "n": n}
                                   for k, (m, lo, hi, n) in self.paired.items()},
                "runs": [{"repetition": rep, "values": values, "holds": holds} for rep, values, holds in self.runs],
                "measured": self.measured(), "reason": self.reason, "unhealthy_runs": self.unhealthy}


# A comparison's margin as a bounded term's: margin = sign * term + offset, the term in [low, high].
Limit = tuple[float, float, float, float]


def judge(margins_per_rep: list[list[float]], strict: list[bool],
          limits: list[Limit | None] | None = None) -> tuple[str, tuple[float, float, int]]:
    """Verdict from the margins of each repetition (one list per comparison of the chain)."""
    verdict, worst, _ = judge_intervals(margins_per_rep, strict, limits)
    return verdict, worst


def judge_intervals(margins_per_rep: list[list[float]], strict: list[bool], limits: list[Limit | None] | None = None
                    ) -> tuple[str, tuple[float, float, int], list[tuple[float, float]]]:
    """The verdict, the worst comparison's (mean, CI, n), and each comparison's judged interval:
    the 95 % t-interval of its margins, kept inside the range of a bounded term (`limits`)."""
    verdicts, worst = [], (math.nan, math.nan, 0)
    judged: list[tuple[float, float]] = []
    for k, is_strict in enumerate(strict):
        mean, ci, n = mean_ci95([m[k] for m in margins_per_rep])
        if n == 0:
            return "no data", (mean, ci, n), judged
        lo, hi = (mean, mean) if n < 2 else (mean - ci, mean + ci)
        limit = limits[k] if limits else None
        if limit is not None:
            lo, hi = bounded(lo, hi, limit)
        judged.append((lo, hi))
        holds = lo > 0 or (not is_strict and lo >= 0)
        breaks = hi < 0 or (is_strict and hi <= 0)
        verdicts.append("pass" if holds else "fail" if breaks else "inconclusive")
        if not (worst[0] <= mean):
            worst = (mean, ci, n)
    for v in ("fail", "inconclusive"):
        if v in verdicts:
            return v, worst, judged
    return "pass", worst, judged


def bounded(lo: float, hi: float, limit: Limit) -> tuple[float, float]:
    """A margin's interval [lo, hi] with the term it is made of kept inside the term's range."""
    sign, offset, low, high = limit
    ends = sorted(min(high, max(low, (x - offset) / sign)) for x in (lo, hi))
    low_end, high_end = sorted(sign * t + offset for t in ends)
    return low_end, high_end


def bounds_of(node: ast.expr) -> tuple[float, float] | None:
    """The range of a lone bounded metric (jain, share(cc), ...), None for anything else."""
    if isinstance(node, ast.Name):
        return BOUNDED_RUN_TERMS.get(node.id)
    if isinstance(node, ast.Call):
        return BOUNDED_CC_TERMS.get(term_name(node))
    return None


def limits_of(claim: Claim) -> list[Limit | None]:
    """Per comparison of the chain: how its margin is a bounded term compared with a constant, or None."""
    out: list[Limit | None] = []
    for k, op in enumerate(claim.operators):
        a, b = claim.operands[k], claim.operands[k + 1]
        below = op in ("<", "<=")  # the margin is b - a; else a - b
        limit = None
        if claim.is_constant(k) and (range_ := bounds_of(b)):
            c = evaluate(a, lambda _: math.nan)
            limit = (1.0, -c, *range_) if below else (-1.0, c, *range_)
        elif claim.is_constant(k + 1) and (range_ := bounds_of(a)):
            c = evaluate(b, lambda _: math.nan)
            limit = (-1.0, c, *range_) if below else (1.0, -c, *range_)
        out.append(limit)
    return out


def holds_in(margins_: list[float], strict: list[bool]) -> bool:
    """Whether one run's margins (one per comparison) all hold."""
    return all(m > 0 or (not is_strict and m >= 0) for m, is_strict in zip(margins_, strict, strict=True))


class MixedRuns(BadInput):
    """The runs one verdict would pool differ in module build or engine, or repeat a repetition."""


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or getattr(x, "dtype", None) == bool  # noqa: E721 - numpy's bool_ too: a dtype equals bool, it is not bool


def matches(value: Any, wanted: list[Any]) -> bool:
    for w in wanted:
        if _is_bool(value) or _is_bool(w):  # True == 1.0: a boolean matches only a boolean
            if _is_bool(value) and _is_bool(w) and bool(value) == bool(w):
                return True
            continue
        try:
            if float(value) == float(w):
                return True
        except (TypeError, ValueError):
            if str(value) == str(w):
                return True
    return False


def term_value(node: ast.expr, run: RunPoint, steady: dict[str, Any] | None = None) -> float:
    value: Any
    if isinstance(node, ast.Name):
        column = RUN_TERMS[node.id].column
        value = steady.get(column, math.nan) if steady is not None and node.id in STEADY_RUN_TERMS \
            else getattr(run.values, column)
    elif not isinstance(node, ast.Call):
        raise TypeError(f"not a metric: {ast.unparse(node)}")
    elif steady is not None and term_name(node) in STEADY_CC_TERMS:
        value = steady.get(CC_TERMS[term_name(node)].column, {}).get(cc_of_call(node), math.nan)
    else:
        entry = run.ccs.get(cc_of_call(node))
        value = None if entry is None else getattr(entry, CC_TERMS[term_name(node)].column)
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _unhealthy(run: RunPoint) -> str | None:
    """"run_id (failing checks)" for a run whose health verdict is fail, else None."""
    if run.health != "fail":
        return None
    checks = run.health_failed or "checks.json verdict fail"
    return f"{run.run_id} ({checks})"


def declared_runs(e: Expectation, label: str, records: list[RunPoint]) -> tuple[list[RunPoint], str]:
    """The runs a point is judged on: repetition indices 0 to n-1 of the scenario's declared n (all
    runs when none is declared), and a note naming those ignored. Two runs of one index are refused:
    which of them is the point's is not the data's to choose."""
    n = e.repetitions
    chosen = records if n is None else [r for r in records if (rep := r.repetition) is not None and 0 <= rep < n]
    seen: dict[int | None, str] = {}
    for run in chosen:
        rep = run.repetition
        if rep in seen:
            raise MixedRuns(f"{e.scenario} {label}: two runs of repetition {rep} ({seen[rep]} and {run.run_id}); "
                            "a point is judged on one run per repetition: give one set of runs")
        seen[rep] = run.run_id
    extra = sorted({r.repetition for r in records if r not in chosen}, key=lambda x: (x is None, x or 0))
    note = (f"runs of repetition {', '.join(map(str, extra))} ignored: the scenario declares n = {n}" if extra else "")
    return chosen, note


def one_build(e: Expectation, label: str, records: list[RunPoint]) -> None:
    """Refuse runs that loaded two builds of one module, or ran on two engines or kernels."""
    modules: dict[str, tuple[str, str]] = {}  # module -> (its first build, the run that had it)
    engines: dict[str, str] = {}
    for run in records:
        for entry in run.module_builds.split():
            name, _, build = entry.partition("=")
            first = modules.setdefault(name, (build, run.run_id))
            if first[0] != build:
                raise MixedRuns(f"{e.scenario} {label}: runs of two builds of {name}: {first[0]} ({first[1]}) and "
                                f"{build} ({run.run_id}); a verdict pools one build: judge each build's runs apart")
        if run.engine_build:
            engines.setdefault(run.engine_build, run.run_id)
        if len(engines) > 1:
            (a, ra), (b, rb) = list(engines.items())[:2]
            raise MixedRuns(f"{e.scenario} {label}: runs on two engines: {a} ({ra}) and {b} ({rb}); a verdict "
                            "pools one engine and kernel: judge each engine's runs apart")


def check_expectation(e: Expectation, runs: list[RunPoint]) -> list[Verdict]:
    """Judge one expectation on the runs (and, for `steady_from_s`, on their series). Only runs of
    the expectation's suite count: a scenario tagged paper-00N or quick-00N judges the runs that
    record that tag."""
    mine = [run for run in runs if run.scenario == e.scenario]
    suite = [t for t in e.tags if t.startswith(("paper-", "quick-"))]
    if suite:
        mine = [run for run in mine if any(t in run.tags for t in suite)]
    for key, wanted in e.where.items():
        mine = [run for run in mine if key in run.matrix and matches(run.matrix[key], wanted)]
    if not mine:
        return [Verdict(e, "-", "not run", (math.nan, math.nan, 0), {},
                        f"no runs of {e.scenario}" + (f" where {e.where}" if e.where else ""))]
    grouped: dict[str, list[RunPoint]] = {}
    for run in mine:
        grouped.setdefault(run.group, []).append(run)
    points = [(d[0].label, d) for d in grouped.values()]
    chosen = {label: declared_runs(e, label, d) for label, d in points}
    steady: dict[int, dict[str, Any]] = {}
    if e.steady_from_s is not None:
        from .run_point import steady_from

        steady = {id(run): steady_from(run.series, e.steady_from_s) for run in mine}

    def in_point(d: list[RunPoint]) -> bool:
        return all(any(cc in r.ccs for r in d) for cc in e.claim.ccs)

    def of_run(run: RunPoint) -> Callable[[ast.expr], float]:
        return lambda node: term_value(node, run, steady.get(id(run)) if steady else None)

    if all(in_point(d) for _, d in points):
        verdicts = []
        for label, _ in points:
            records, note = chosen[label]
            one_build(e, label, records)
            sick = [s for s in map(_unhealthy, records) if s]
            healthy = [(run.repetition, of_run(run)) for run in records if not _unhealthy(run)]
            verdicts.append(_judged(e, label, healthy, "not measured", sick, len(records), note))
        return verdicts
    # Across points: each term averaged, per repetition index, over the points where it was measured.
    records = [run for label, _ in points for run in chosen[label][0]]
    one_build(e, "across points", records)
    notes = "; ".join(f"{label}: {note}" for label, (_, note) in chosen.items() if note)
    by_rep: dict[Any, list[RunPoint]] = {}
    sick = [s for s in map(_unhealthy, records) if s]
    for run in records:
        if not _unhealthy(run):
            by_rep.setdefault(run.repetition, []).append(run)

    def of_repetition(runs: list[RunPoint]) -> Callable[[ast.expr], float]:
        def lookup(node: ast.expr) -> float:
            import numpy as np

            values = [v for v in (of_run(run)(node) for run in runs) if math.isfinite(v)]
            return float(np.mean(values)) if values else math.nan
        return lookup

    present = min(len(runs_) for runs_, _ in chosen.values())
    return [_judged(e, "across points", [(rep, of_repetition(runs)) for rep, runs in by_rep.items()],
                    "not measured in any selected point", sick, present, notes)]


def _judged(e: Expectation, label: str, samples: list[tuple[Any, Callable[[ast.expr], float]]], missing: str,
            unhealthy: list[str], present: int | None = None, note: str = "") -> Verdict:
    """Judge a claim on its samples: (repetition, lookup: metric node -> value) per run (healthy runs
    only), `present` of the declared n runs there. Fewer than n runs make it incomplete; any run
    left out for its health makes it inconclusive."""
    claim = e.claim
    strict = [op in ("<", ">") for op in claim.operators]
    lookups = [look for _, look in samples]
    per_rep = [m for m in (margins(claim, look) for look in lookups) if all(math.isfinite(x) for x in m)]
    values = {claim.operand_text(k): mean_ci95([evaluate(operand, look) for look in lookups])
              for k, operand in enumerate(claim.operands) if not claim.is_constant(k)}
    limits = limits_of(claim)
    verdict, margin, judged = judge_intervals(per_rep, strict, limits)
    intervals, paired = _shown_intervals(claim, values, limits, judged, margin[2])
    runs: list[tuple[Any, dict[str, float], bool]] = []
    reason = ""
    n = e.repetitions
    if e.at_least_runs is not None and verdict != "no data":
        runs = _race_runs(claim, samples, strict)
        verdict, margin = _race_verdict(e, runs, present), (margin[0], math.nan, len(runs))
        intervals, paired = {}, {}
        if verdict == "incomplete":
            reason = f"incomplete ({present} of {n}): the race is not decided yet"
    elif verdict != "no data" and n is not None and present is not None and present < n:
        verdict, reason = "incomplete", f"incomplete ({present} of {n})"
    if verdict == "no data" and samples:
        terms = [node for operand in claim.operands for node in metric_nodes(operand)]
        unmeasured = sorted({ast.unparse(t) for t in terms if all(math.isnan(look(t)) for look in lookups)})
        reason = f"{missing}: {', '.join(unmeasured) or 'a term'}"
        if e.steady_from_s is not None and any(t in steady_terms(claim) for t in unmeasured):
            reason += (f" (steady_from_s: {e.steady_from_s:g} s needs the runs' throughput series; a compact "
                       "record keeps the windows from whole seconds only)")
    if n is not None and present is not None and present < n and verdict == "no data":
        # a point still short of its n is incomplete, whatever its first runs lack (e.g. not ingested yet)
        verdict, reason = "incomplete", f"incomplete ({present} of {n})" + (f"; {reason}" if reason else "")
    if unhealthy:
        healthy = f"the healthy runs alone: {verdict}" if samples else "no healthy run"
        reason = (f"health fail, left out: {', '.join(unhealthy)}; {healthy}" + (f" ({reason})" if reason else ""))
        verdict = "inconclusive"
    if note:
        reason = f"{reason}; {note}" if reason else note
    return Verdict(e, label, verdict, margin, values, reason, list(unhealthy), intervals, paired, runs)


def _shown_intervals(claim: Claim, values: dict, limits: list[Limit | None], judged: list[tuple[float, float]],
                     n: int) -> tuple[dict, dict]:
    """What the judged intervals look like next to the terms: a bounded term's clipped interval by
    its text, and the seed-paired margin of each comparison of two terms."""
    intervals: dict[str, tuple[float, float]] = {}
    paired: dict[str, tuple[float, float, float, int]] = {}
    for k, interval in enumerate(judged):
        a, b = claim.operand_text(k), claim.operand_text(k + 1)
        limit = limits[k]
        if limit is not None:
            term = b if claim.is_constant(k) else a
            mean, ci, _ = values[term]
            low, high = limit[2:]
            intervals[term] = (mean, mean) if math.isnan(ci) else (max(low, mean - ci), min(high, mean + ci))
        elif not claim.is_constant(k) and not claim.is_constant(k + 1):
            mid = (interval[0] + interval[1]) / 2
            paired[f"{a} {claim.operators[k]} {b}"] = (mid, interval[0], interval[1], n)
    return intervals, paired


def _race_runs(claim: Claim, samples: list[tuple[Any, Callable[[ast.expr], float]]],
               strict: list[bool]) -> list[tuple[Any, dict[str, float], bool]]:
    """Each run of a race: its repetition, its operands' values and whether the claim held in it."""
    out = []
    for rep, look in sorted(samples, key=lambda s: (s[0] is None, s[0] or 0)):
        m = margins(claim, look)
        if not all(math.isfinite(x) for x in m):
            continue
        values = {claim.operand_text(k): evaluate(op, look) for k, op in enumerate(claim.operands)
                  if not claim.is_constant(k)}
        out.append((rep, values, holds_in(m, strict)))
    return out


def _race_verdict(e: Expectation, runs: list[tuple[Any, dict[str, float], bool]], present: int | None) -> str:
    """Pass once the claim held in at_least_runs runs, fail once it no longer can (the runs not yet
    made counted as wins), incomplete otherwise: no run to come can change a decided race."""
    need = e.at_least_runs or 0
    n = e.repetitions if e.repetitions is not None else len(runs)
    wins = sum(holds for _, _, holds in runs)
    missing = max(0, n - (present if present is not None else len(runs))) + \
        max(0, (present if present is not None else len(runs)) - len(runs))
    if wins >= need:
        return "pass"
    if wins + missing < need:
        return "fail"
    return "incomplete"


def expectations_of_experiments(experiments: Experiments) -> list[Expectation]:
    """Every claim of an experiments file (cctest.model.scenario.Experiments), with its scenario's tags and
    declared repetitions (the n every point is judged on)."""
    out = []
    for name, scenario in experiments.scenarios.items():
        for entry in scenario.expect:
            out.append(Expectation.from_entry(name, entry.model_dump(exclude_none=True), tuple(scenario.tags),
                                              scenario.repetitions))
    return out


def judge_all(expectations: list[Expectation], runs: list[RunPoint]) -> list[Verdict]:
    return [v for e in expectations for v in check_expectation(e, runs)]


def failed(verdicts: list[Verdict]) -> list[Verdict]:
    """Points contradicted by the data, or with nothing to judge them on."""
    return [v for v in verdicts if v.verdict in ("fail", "no data")]


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    out = {"pass": 0, "fail": 0, "inconclusive": 0, "incomplete": 0, "no data": 0, "not run": 0}
    for v in verdicts:
        out[v.verdict] += 1
    return out


# ---------------------------------------------------------------------------------------------
# A claim's status over its points
# ---------------------------------------------------------------------------------------------


@dataclass
class ClaimResult:
    """One claim over all its selected points: its verdict (pass, fail, inconclusive, no data, not
    run) and its status (STATUSES), which `known` decides."""

    expectation: Expectation
    points: list[Verdict]
    verdict: str
    status: str
    reason: str

    @property
    def gates(self) -> bool:
        return self.status in GATE

    def as_dict(self) -> dict:
        e = self.expectation
        return {"scenario": e.scenario, "claim": e.claim.text, "where": e.where, "source": e.source,
                "paper": e.paper, "at_least": e.at_least, "steady_from_s": e.steady_from_s,
                "repetitions": e.repetitions, "at_least_runs": e.at_least_runs, "sanity": e.sanity,
                "scored": e.scored,
                "known": None if e.known is None else {"triage": e.known.triage, "reason": e.known.reason},
                "verdict": self.verdict, "status": self.status, "reason": self.reason,
                "points": [v.point for v in self.points]}


def overall(e: Expectation, points: list[Verdict]) -> tuple[str, str]:
    """A claim's verdict over its points and why: pass when at least `at_least` (default: all) pass,
    fail when so many fail (or have no data) that it cannot, incomplete while a point lacks declared
    runs, inconclusive otherwise; not run when no point ran. "no data" stands for points that ran
    without the terms the claim needs."""
    ran = [v for v in points if v.verdict != "not run"]
    if not ran:
        return "not run", (points[0].reason if points else f"no runs of {e.scenario}")
    need = e.at_least if e.at_least is not None else len(points)
    passed = sum(v.verdict == "pass" for v in points)
    failed_ = [v for v in points if v.verdict in ("fail", "no data")]
    of = f"{passed} of {len(points)} points pass, {need} needed" if len(points) > 1 else ""
    reasons = "; ".join(dict.fromkeys(f"{v.point}: {v.reason}" if len(points) > 1 else v.reason
                                      for v in points if v.reason and v.verdict != "pass"))
    why = "; ".join(x for x in (of, reasons) if x)
    if passed >= need:
        return "pass", why
    if len(points) - len(failed_) < need:
        no_data = all(v.verdict == "no data" for v in failed_)
        return ("no data" if no_data else "fail"), why
    # undecided: incomplete while a point still lacks declared runs, inconclusive once all ran
    return ("incomplete" if any(v.verdict == "incomplete" for v in points) else "inconclusive"), why


def results(verdicts: list[Verdict]) -> list[ClaimResult]:
    """Per-point verdicts (as judge_all returns them, grouped by their expectation) -> one result
    per claim."""
    grouped: dict[int, tuple[Expectation, list[Verdict]]] = {}
    for v in verdicts:
        grouped.setdefault(id(v.expectation), (v.expectation, []))[1].append(v)
    out = []
    for e, points in grouped.values():
        verdict, reason = overall(e, points)
        out.append(ClaimResult(e, points, verdict, status_of(verdict, e.known), reason))
    return out


def status_of(verdict: str, known: Known | None) -> str:
    """pass -> pass (known: unexpected-pass); fail -> fail (known: known-fail); no data -> fail even
    when known (a known finding is a result, not a missing measurement); inconclusive; incomplete; not run."""
    if verdict == "pass":
        return "unexpected-pass" if known else "pass"
    if verdict == "fail":
        return "known-fail" if known else "fail"
    if verdict == "no data":
        return "fail"
    if verdict == "incomplete":
        return "incomplete"
    return "not-run" if verdict == "not run" else "inconclusive"


def status_counts(claim_results: list[ClaimResult]) -> dict[str, int]:
    out = {s: 0 for s in STATUSES}
    for r in claim_results:
        out[r.status] += 1
    return out


def claims_json(verdicts: list[Verdict], notes: list[str]) -> dict:
    """counts and claims: per matrix point; statuses and results: per claim, with its status
    (pass, fail, known-fail, unexpected-pass, inconclusive, not-run: docs/experiments.md, "Claims")."""
    per_claim = results(verdicts)
    return {"counts": counts(verdicts), "statuses": status_counts(per_claim), "notes": notes,
            "results": [r.as_dict() for r in per_claim], "claims": [v.as_dict() for v in verdicts]}
