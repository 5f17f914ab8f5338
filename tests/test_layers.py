"""The package's house reads top-down: every import of cctest/ (at module level or inside a function)
goes to its own layer or one below, and no modules import each other in a circle.

The layers, top first. A module is placed by the first pattern that matches its dotted name; a new
module that matches none fails the test until it is placed.
"""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cctest"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("entry: the command line", ("cctest.__main__", "cctest.cli", "cctest.completion", "cctest.report.command",
                                  "cctest.validation.command")),
    ("commands: a run, a VM session, the doctor, clean", (
        "cctest.session", "cctest.doctor", "cctest.engines", "cctest.cleanup")),
    ("machines: the guest kernels and the run itself", (
        "cctest.vm", "cctest.uml", "cctest.umlshare", "cctest.umlkernel", "cctest.runner")),
    ("side effects: the network, captures, modules, files", (
        "cctest.net", "cctest.net.*", "cctest.captures", "cctest.captures.*", "cctest.ingest", "cctest.journal",
        "cctest.kmod", "cctest.rundir", "cctest.checks", "cctest.compact", "cctest.report", "cctest.report.*",
        "cctest.validation", "cctest.validation.*", "cctest.cgroup",
        "cctest.tracefs", "cctest.filelock")),
    ("the model: pure code on scenarios, plans and tables", (
        "cctest.scenario", "cctest.plan", "cctest.dumbbell", "cctest.bottleneck", "cctest.aqm", "cctest.claims",
        "cctest.metrics", "cctest.metric_table", "cctest.derived", "cctest.bbr_model", "cctest.record",
        "cctest.modsource", "cctest.modparams")),
    ("the ground: constants, statistics, safe reading and writing", (
        "cctest", "cctest.stats", "cctest.wire", "cctest.strict", "cctest.defaults", "cctest.limits",
        "cctest.errors", "cctest.atomic", "cctest.jsonsafe", "cctest.vmtime", "cctest.safeload", "cctest.runfiles",
        "cctest.projectccs", "cctest.tools")),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The cctest modules `name` imports anywhere in its file (a package's submodule when one is
    named, e.g. `from . import metrics`)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "cctest"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "cctest":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def layer_of(name: str) -> int:
    for depth, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            return depth
    raise LookupError(name)


def test_every_module_has_a_layer():
    unplaced = []
    for name in MODULES:
        try:
            layer_of(name)
        except LookupError:
            unplaced.append(name)
    assert not unplaced, f"place these in a layer of tests/test_layers.py: {unplaced}"


def test_no_import_runs_up_a_layer():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in GRAPH.items() for b in sorted(targets) if layer_of(b) < layer_of(a)]
    assert not upward, "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's floor, derived from the imports: 1 + the highest floor it imports (1: none)."""
    memo: dict[str, int] = {}

    def floor(v: str) -> int:
        if v not in memo:
            memo[v] = 1 + max((floor(w) for w in graph[v]), default=0)
        return memo[v]

    return {v: floor(v) for v in graph}


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, f"modules that import each other in a circle: {found}"
    # acyclic, so every module has a floor: the house the layers above describe
    assert floors(GRAPH)["cctest.__main__"] > floors(GRAPH)["cctest.errors"]


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_a_circle(graph, expected):
    assert cycles(graph) == expected


# What a guest imports to make runs (cctest run --native --in-vm, then each capture's start): under
# emulation every import costs host time (pandas alone took 1.75 s of a UML guest's 10 s to its first
# run), and its tables are made on the host afterwards.
GUEST_RUN_PATH = ["cctest.cli", "cctest.session", "cctest.runner", "cctest.net.topology", "cctest.net.traffic",
                  "cctest.net.schedule", "cctest.captures", "cctest.scenario", "cctest.plan", "cctest.kmod",
                  "cctest.doctor", "cctest.journal", "cctest.rundir", "cctest.tracefs", "cctest.cgroup",
                  "cctest.vmtime", "cctest.modsource"]
HOST_ONLY = ("pandas", "numpy", "pyarrow", "plotly")


def test_the_guest_run_path_imports_no_table_library():
    code = (f"import importlib, sys\nfor m in {GUEST_RUN_PATH!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HOST_ONLY!r} and '.' not in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
