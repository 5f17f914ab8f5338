"""Paper claims as code: the `expect:` entries of a scenario, judged on measured runs.

A claim is one comparison (or a chain: `0.4 < share(bbr) < 0.6`) between arithmetic on the
report's metrics and numbers. It is parsed with Python's `ast` into a whitelist of node types and
evaluated by walking that tree: nothing is ever passed to eval, names outside the vocabulary below
are rejected at load with the allowed ones listed.

Judging. A claim whose congestion controls all run in each selected matrix point is judged per
point: every repetition gives a margin (how far the comparison holds: positive = holds), and the
point passes when the 95 % Student-t interval of the margins lies on the holding side, fails when it
lies on the other, and is inconclusive when it straddles zero. One repetition judges by its value.
A claim naming controls that run in different points (`retransmits(bbr_cws) <= 0.5 *
retransmits(bbr)` over a `flows.1.cc` sweep) is judged across points: each term is averaged over
the selected points where it was measured, per repetition index, and those margins are judged the
same way.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from .metrics import mean_ci95

# Run-level terms: name in a claim -> column of the report's per-run table, and what it means.
RUN_TERMS = {
    "jain": ("jain", "Jain's index of the flows' mean throughputs, whole run"),
    "jain_steady": ("jain_steady", "Jain's index in steady state"),
    "utilisation": ("utilisation", "delivered bytes / link capacity (0-1)"),
    "throughput_mbps": ("throughput_mbps", "aggregate goodput, Mbit/s"),
    "retransmits_total": ("retransmits", "all flows' retransmitted segments"),
    "loss_rate": ("bottleneck_loss_rate", "bottleneck drops / packets offered (0-1)"),
    "drops": ("bottleneck_drops", "bottleneck drops, packets"),
    "queue_delay_ms": ("mean_queue_delay_ms", "mean bottleneck queue delay (backlog / rate), ms"),
    "p95_queue_delay_ms": ("p95_queue_delay_ms", "95th percentile bottleneck queue delay, ms"),
    "queue_bdp": ("mean_queue_bdp", "mean bottleneck queue occupancy, BDP"),
    "max_queue_bdp": ("max_queue_bdp", "largest bottleneck queue occupancy, BDP"),
    "srtt_qdelay_ms": ("mean_srtt_qdelay_ms", "mean srtt minus min RTT over flows, ms"),
    "short_rtt_share": ("short_rtt_flow_share", "steady share of the flow with the smallest RTT"),
}
# Per congestion-control terms: term(cc) -> (column of the per-run x cc table, how flows combine).
CC_TERMS = {
    "share": ("share", "fraction of all delivered bytes that cc's flows carried"),
    "steady_share": ("steady_share", "that fraction in steady state"),
    "throughput": ("throughput_mbps", "cc's flows' goodput together, Mbit/s"),
    "retransmits": ("retransmits", "cc's flows' retransmitted segments together"),
    "startup_s": ("startup_exit_s", "seconds from a flow's first byte to its module leaving Startup (this "
                                    "project's modules only: they trace their mode), mean over cc's flows"),
}
COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
MAX_CLAIM_CHARS = 300
MAX_NODES = 60


class ClaimError(ValueError):
    """A claim that cannot be parsed or names what does not exist; the message is one line."""


def vocabulary() -> str:
    return (f"metrics {', '.join(RUN_TERMS)}; per cc {', '.join(f'{t}(cc)' for t in CC_TERMS)}; "
            f"numbers; + - * / and parentheses; one comparison (<, <=, >, >=), chains allowed")


@dataclass(frozen=True)
class Claim:
    """A parsed claim: operands (ast expressions) joined by comparison operators."""

    text: str
    operands: tuple[ast.expr, ...]
    operators: tuple[str, ...]
    ccs: frozenset[str]

    def operand_text(self, k: int) -> str:
        return ast.unparse(self.operands[k])

    def is_constant(self, k: int) -> bool:
        return not metric_nodes(self.operands[k])


def metric_nodes(node: ast.expr) -> list[ast.expr]:
    """The metrics an operand reads: run-level names and term(cc) calls (not the calls' parts)."""
    if isinstance(node, (ast.Name, ast.Call)):
        return [node]
    return [m for child in ast.iter_child_nodes(node) for m in metric_nodes(child)]


def parse(text: str) -> Claim:
    """Parse and check a claim; ClaimError names what is wrong and what is allowed."""
    if not isinstance(text, str) or not text.strip():
        raise ClaimError("a claim is a non-empty string, e.g. \"jain < 0.8\"")
    if len(text) > MAX_CLAIM_CHARS:
        raise ClaimError(f"longer than {MAX_CLAIM_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ClaimError(f"not an expression of: {vocabulary()}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ClaimError(f"more than {MAX_NODES} terms")
    body = tree.body
    if not isinstance(body, ast.Compare):
        raise ClaimError(f"must compare (<, <=, >, >=), e.g. \"jain < 0.8\"; allowed: {vocabulary()}")
    operators = []
    for op in body.ops:
        if type(op) not in COMPARISONS:
            raise ClaimError(f"comparison {type(op).__name__} not allowed: use <, <=, >, >= (measured values "
                             "are never exactly equal)")
        operators.append(COMPARISONS[type(op)])
    operands = (body.left, *body.comparators)
    ccs: set[str] = set()
    for operand in operands:
        _check_arithmetic(operand, ccs)
    claim = Claim(text.strip(), operands, tuple(operators), frozenset(ccs))
    if all(claim.is_constant(k) for k in range(len(operands))):
        raise ClaimError("compares only numbers: name a metric")
    _check_satisfiable(claim)
    return claim


# Terms only this project's modules can have: the kernel's controls trace no mode.
PROJECT_ONLY_TERMS = ("startup_s",)


def _check_satisfiable(claim: Claim) -> None:
    """Refuse a claim no measurement can pass, where that is decidable from its text: a constant
    that divides by zero, two constants of a chain in the wrong order (`jain < 1 < 0`,
    `0.6 < share(bbr) < 0.4`), a term the named control cannot have (`startup_s(cubic)`)."""
    from .projectccs import project_ccs

    for operand in claim.operands:
        for node in ast.walk(operand):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and not metric_nodes(node.right):
                if evaluate(node.right, lambda _: math.nan) == 0:
                    raise ClaimError(f"{ast.unparse(node)} divides by zero: no measurement can pass it")
            if isinstance(node, ast.Call) and node.func.id in PROJECT_ONLY_TERMS:
                cc = cc_of_call(node)
                if cc not in project_ccs():
                    raise ClaimError(f"{ast.unparse(node)}: {cc} has no Startup mode cctest can see (only this "
                                     f"project's modules trace their mode: {', '.join(project_ccs())})")
    constants = [k for k in range(len(claim.operands)) if claim.is_constant(k)]
    for i, j in ((i, j) for i in constants for j in constants if i < j):
        between = set(claim.operators[i:j])
        if between <= {"<", "<="} or between <= {">", ">="}:
            low, high = (evaluate(claim.operands[k], lambda _: math.nan) for k in (i, j))
            strict = bool(between & {"<", ">"})
            if between <= {">", ">="}:
                low, high = high, low
            if low > high or (strict and low == high):
                raise ClaimError(f"{claim.operand_text(i)} and {claim.operand_text(j)} make the chain impossible: "
                                 "no measurement can pass it")


def _check_arithmetic(node: ast.expr, ccs: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)) or not math.isfinite(node.value):
            raise ClaimError(f"{ast.unparse(node)}: only finite numbers are allowed as constants")
    elif isinstance(node, ast.Name):
        if node.id not in RUN_TERMS:
            hint = f" (per cc: {node.id}(cc))" if node.id in CC_TERMS else ""
            raise ClaimError(f"unknown metric {node.id!r}{hint}; allowed: {vocabulary()}")
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in CC_TERMS:
            raise ClaimError(f"unknown function {ast.unparse(node.func)!r}; allowed: "
                             f"{', '.join(f'{t}(cc)' for t in CC_TERMS)}")
        if node.keywords or len(node.args) != 1:
            raise ClaimError(f"{name}() takes one congestion control, e.g. {name}(bbr)")
        arg = node.args[0]
        if isinstance(arg, ast.Name):
            ccs.add(arg.id)
        elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            ccs.add(arg.value)
        else:
            raise ClaimError(f"{name}(): the argument is a congestion control's name, e.g. {name}(bbr)")
    elif isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        _check_arithmetic(node.left, ccs)
        _check_arithmetic(node.right, ccs)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check_arithmetic(node.operand, ccs)
    else:
        raise ClaimError(f"{ast.unparse(node)!r} not allowed; allowed: {vocabulary()}")


def cc_of_call(node: ast.Call) -> str:
    arg = node.args[0]
    return arg.id if isinstance(arg, ast.Name) else arg.value


def evaluate(node: ast.expr, lookup: Callable[[ast.expr], float]) -> float:
    """Value of an operand, with `lookup` giving each metric's (Name or Call node's) value."""
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, (ast.Name, ast.Call)):
        return float(lookup(node))
    if isinstance(node, ast.UnaryOp):
        value = evaluate(node.operand, lookup)
        return -value if isinstance(node.op, ast.USub) else value
    left, right = evaluate(node.left, lookup), evaluate(node.right, lookup)
    op = ARITHMETIC[type(node.op)]
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    return left / right if right != 0 else math.nan


def margins(claim: Claim, lookup: Callable[[ast.expr], float]) -> list[float]:
    """For each comparison in the chain, how far it holds (positive) or fails (negative)."""
    values = [evaluate(op, lookup) for op in claim.operands]
    out = []
    for k, op in enumerate(claim.operators):
        a, b = values[k], values[k + 1]
        out.append(b - a if op in ("<", "<=") else a - b)
    return out


# ---------------------------------------------------------------------------------------------
# Judging on measured runs
# ---------------------------------------------------------------------------------------------


@dataclass
class Expectation:
    """One `expect:` entry of a scenario, as recorded in its run directories."""

    scenario: str
    claim: Claim
    where: dict[str, list[Any]] = field(default_factory=dict)
    source: str = ""
    note: str = ""

    @classmethod
    def from_entry(cls, scenario: str, entry: dict) -> "Expectation":
        where = {k: v if isinstance(v, list) else [v] for k, v in (entry.get("where") or {}).items()}
        return cls(scenario, parse(entry["claim"]), where, str(entry.get("source") or ""),
                   str(entry.get("note") or ""))


@dataclass
class Verdict:
    expectation: Expectation
    point: str  # the matrix point's label, or "across points"
    verdict: str  # pass, fail, inconclusive, no data
    margin: tuple[float, float, int]  # mean, 95 % CI half-width, n (worst comparison of a chain)
    values: dict[str, tuple[float, float, int]]  # each non-constant operand: mean, CI, n
    reason: str = ""

    def measured(self) -> str:
        parts = []
        for text, (mean, ci, n) in self.values.items():
            ci_text = f" ± {ci:.3g}" if ci == ci else ""
            parts.append(f"{text} = {mean:.3g}{ci_text} (n={n})")
        return "; ".join(parts) or self.reason

    def as_dict(self) -> dict:
        """As claims.json has it (NaN stays NaN here: the writer makes it null, as for summary.json)."""
        e = self.expectation
        return {"scenario": e.scenario, "claim": e.claim.text, "where": e.where, "source": e.source,
                "note": e.note, "point": self.point, "verdict": self.verdict,
                "margin": {"mean": self.margin[0], "ci95": self.margin[1], "n": self.margin[2]},
                "values": {k: {"mean": m, "ci95": c, "n": n} for k, (m, c, n) in self.values.items()},
                "measured": self.measured(), "reason": self.reason}


def judge(margins_per_rep: list[list[float]], strict: list[bool]) -> tuple[str, tuple[float, float, int]]:
    """Verdict from the margins of each repetition (one list per comparison of the chain)."""
    verdicts, worst = [], (math.nan, math.nan, 0)
    for k, is_strict in enumerate(strict):
        mean, ci, n = mean_ci95([m[k] for m in margins_per_rep])
        if n == 0:
            return "no data", (mean, ci, n)
        lo, hi = (mean, mean) if n < 2 else (mean - ci, mean + ci)
        holds = lo > 0 or (not is_strict and lo >= 0)
        breaks = hi < 0 or (is_strict and hi <= 0)
        verdicts.append("pass" if holds else "fail" if breaks else "inconclusive")
        if not (worst[0] <= mean):
            worst = (mean, ci, n)
    for v in ("fail", "inconclusive"):
        if v in verdicts:
            return v, worst
    return "pass", worst


def _matches(value: Any, wanted: list[Any]) -> bool:
    for w in wanted:
        try:
            if float(value) == float(w):
                return True
        except (TypeError, ValueError):
            if str(value) == str(w):
                return True
    return False


def _cc_values(groups: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(run_id, cc) -> that cc's row of the report's per-run x cc table, with its flows' goodput
    summed (the table has their mean)."""
    out: dict[tuple[str, str], dict] = {}
    for row in groups.to_dict("records"):
        row["throughput_mbps"] = float(row.get("mean_mbps", math.nan)) * (row.get("flows") or 0)
        out[(row["run_id"], row["cc"])] = row
    return out


def _term_value(node: ast.expr, run: dict, cc_values: dict) -> float:
    if isinstance(node, ast.Name):
        value = run.get(RUN_TERMS[node.id][0])
    else:
        entry = cc_values.get((run["run_id"], cc_of_call(node)))
        value = None if entry is None else entry.get(CC_TERMS[node.func.id][0])
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def check_expectation(e: Expectation, runs: pd.DataFrame, groups: pd.DataFrame) -> list[Verdict]:
    """Judge one expectation on the per-run table and the per-run x cc table of a report."""
    mine = runs[runs["scenario"] == e.scenario] if len(runs) else runs
    for key, wanted in e.where.items():
        column = f"matrix.{key}"
        mine = mine[mine[column].map(lambda v: _matches(v, wanted))] if column in mine else mine.iloc[0:0]
    if mine.empty:
        return [Verdict(e, "-", "no data", (math.nan, math.nan, 0), {},
                        f"no runs of {e.scenario}" + (f" where {e.where}" if e.where else ""))]
    cc_values = _cc_values(groups[groups["run_id"].isin(mine["run_id"])]) if len(groups) else {}
    points = list(mine.groupby("group", sort=False))

    def in_point(d: pd.DataFrame) -> bool:
        return all(any((r, cc) in cc_values for r in d["run_id"]) for cc in e.claim.ccs)

    def of_run(run: dict) -> Callable[[ast.expr], float]:
        return lambda node: _term_value(node, run, cc_values)

    if all(in_point(d) for _, d in points):
        return [_judged(e, str(d["group_label"].iloc[0]), [of_run(run) for run in d.to_dict("records")],
                        "not measured") for _, d in points]
    # Across points: each term averaged, per repetition index, over the points where it was measured.
    by_rep: dict[Any, list[dict]] = {}
    for run in mine.to_dict("records"):
        by_rep.setdefault(run.get("repetition"), []).append(run)

    def of_repetition(runs: list[dict]) -> Callable[[ast.expr], float]:
        def lookup(node: ast.expr) -> float:
            values = [v for v in (_term_value(node, run, cc_values) for run in runs) if math.isfinite(v)]
            return float(np.mean(values)) if values else math.nan
        return lookup

    return [_judged(e, "across points", [of_repetition(runs) for runs in by_rep.values()],
                    "not measured in any selected point")]


def _judged(e: Expectation, label: str, samples: list[Callable[[ast.expr], float]], missing: str) -> Verdict:
    """Judge a claim on its samples: one lookup (metric node -> value) per repetition."""
    claim = e.claim
    per_rep = [m for m in (margins(claim, look) for look in samples) if all(math.isfinite(x) for x in m)]
    values = {claim.operand_text(k): mean_ci95([evaluate(operand, look) for look in samples])
              for k, operand in enumerate(claim.operands) if not claim.is_constant(k)}
    verdict, margin = judge(per_rep, [op in ("<", ">") for op in claim.operators])
    reason = ""
    if verdict == "no data":
        terms = [node for operand in claim.operands for node in metric_nodes(operand)]
        unmeasured = sorted({ast.unparse(t) for t in terms if all(math.isnan(look(t)) for look in samples)})
        reason = f"{missing}: {', '.join(unmeasured) or 'a term'}"
    return Verdict(e, label, verdict, margin, values, reason)


def expectations_of_runs(runs) -> tuple[list[Expectation], list[str]]:
    """The expectations recorded with each scenario's runs (their scenario.yaml), once per scenario.
    Returns them and notes on any that could not be read."""
    from .safeload import Refused, load_yaml_file
    from .scenario import MAX_FILE_BYTES

    seen: dict[str, list] = {}
    notes: list[str] = []
    for run in runs:
        name = run.meta.get("scenario")
        if name in seen or not isinstance(name, str):
            continue
        path = run.path / "scenario.yaml"
        try:  # the loader of experiments.yaml: a run directory may come from anywhere (a CI artifact)
            resolved = load_yaml_file(path, MAX_FILE_BYTES, "a scenario.yaml") if path.exists() else {}
        except Refused as error:
            notes.append(f"{error}; its claims are not judged")
            resolved = {}
        seen[name] = (resolved.get("expect") or []) if isinstance(resolved, dict) else []
    out = []
    for name, entries in seen.items():
        for k, entry in enumerate(entries):
            try:
                out.append(Expectation.from_entry(name, entry))
            except (ClaimError, KeyError, TypeError, AttributeError) as error:
                notes.append(f"scenario {name}: expect.{k}: {error}; not judged")
    return out, notes


def judge_all(expectations: list[Expectation], runs: pd.DataFrame, groups: pd.DataFrame) -> list[Verdict]:
    return [v for e in expectations for v in check_expectation(e, runs, groups)]


def failed(verdicts: list[Verdict]) -> list[Verdict]:
    """What fails the gate: a claim contradicted by the data, or one with nothing to judge it on."""
    return [v for v in verdicts if v.verdict in ("fail", "no data")]


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    out = {"pass": 0, "fail": 0, "inconclusive": 0, "no data": 0}
    for v in verdicts:
        out[v.verdict] += 1
    return out
