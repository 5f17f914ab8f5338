"""The language of paper claims: the `claim:` of a scenario's `expect:` entry, parsed and checked.

A claim is one comparison (or a chain: `0.4 < share(bbr) < 0.6`) between arithmetic on the
report's metrics and numbers. It is parsed with Python's `ast` into a whitelist of node types and
evaluated by walking that tree: nothing is ever passed to eval, names outside the vocabulary below
are rejected at load with the allowed ones listed.

Judging a claim on measured runs is analysis/claims.py.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass

from ..kernel.projectccs import project_ccs
from .metric_table import CC_TERMS, RUN_TERMS, STEADY_CC_TERMS, STEADY_RUN_TERMS

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


def metric_nodes(node: ast.AST) -> list[ast.expr]:
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
    for operand in claim.operands:
        for node in ast.walk(operand):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and not metric_nodes(node.right):
                if evaluate(node.right, lambda _: math.nan) == 0:
                    raise ClaimError(f"{ast.unparse(node)} divides by zero: no measurement can pass it")
            if isinstance(node, ast.Call) and term_name(node) in PROJECT_ONLY_TERMS:
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
    if isinstance(arg, ast.Name):
        return arg.id
    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str)  # what parse() admits
    return arg.value


def term_name(node: ast.Call) -> str:
    """The term a parsed claim's call names: parse() admits only a plain name, share(bbr)."""
    assert isinstance(node.func, ast.Name)
    return node.func.id


def evaluate(node: ast.expr, lookup: Callable[[ast.expr], float]) -> float:
    """Value of an operand, with `lookup` giving each metric's (Name or Call node's) value."""
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # what parse() admits
        return float(node.value)
    if isinstance(node, (ast.Name, ast.Call)):
        return float(lookup(node))
    if isinstance(node, ast.UnaryOp):
        value = evaluate(node.operand, lookup)
        return -value if isinstance(node.op, ast.USub) else value
    assert isinstance(node, ast.BinOp)
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


def steady_terms(claim: Claim) -> list[str]:
    """The claim's terms that are measured over the steady window (what steady_from_s moves)."""
    names = []
    for operand in claim.operands:
        for node in metric_nodes(operand):
            if isinstance(node, ast.Name) and node.id in STEADY_RUN_TERMS:
                names.append(node.id)
            elif isinstance(node, ast.Call) and term_name(node) in STEADY_CC_TERMS:
                names.append(ast.unparse(node))
    return names
