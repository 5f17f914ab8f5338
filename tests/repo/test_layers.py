"""The package's house reads top-down: each folder of cctest/ is a layer, and every import of
cctest/ (at module level or inside a function) goes to its own layer or one below; no modules
import each other in a circle.

A module's layer is the folder it lies in under cctest/ (a folder's own folders belong to it:
host/net/, host/captures/). LAYERS ranks the folders, top first; a folder it does not rank, or a
module lying loose in cctest/ beside the package's face (__init__.py) and `python -m cctest`
(__main__.py), fails the test until it is placed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

PACKAGE = REPO / "cctest"

LAYERS: tuple[tuple[str, str], ...] = (
    ("cli", "the command line: parse, call, print"),
    ("validation", "a real testbed's published table beside the peer suite's runs, and its page"),
    ("report", "figures and the HTML page: presentation only"),
    ("run", "a run on this machine, the session around it, the doctor, clean"),
    ("emulation", "the engines a run boots: a QEMU VM, User-Mode Linux"),
    ("analysis", "tables, metrics, health checks, the summary and the claims judged: no figure"),
    ("host", "what a run does to the machine: network, captures, cgroups, tracefs, the run directory"),
    ("model", "pure code on scenarios, claims, plans, the dumbbell and the records of a run"),
    ("kernel", "the congestion controls: their sources, parameters, build and load"),
    ("base", "errors, safe reading and writing, locks, strict models, limits"),
)
RANK = {folder: rank for rank, (folder, _) in enumerate(LAYERS)}
ENTRY, FACE = "cctest.__main__", "cctest"  # above every layer; below every layer (the version)
FOLDERS = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}


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
    if name == ENTRY:
        return -1
    if name == FACE:
        return len(LAYERS)
    return RANK[name.split(".")[1]]


def described(name: str) -> str:
    rank = layer_of(name)
    return f"{name} ({LAYERS[rank][0] if 0 <= rank < len(LAYERS) else 'the package'})"


def test_the_folders_are_the_layers():
    assert FOLDERS == set(RANK), (f"rank these folders in tests/repo/test_layers.py: {sorted(FOLDERS - set(RANK))}; "
                                  f"gone: {sorted(set(RANK) - FOLDERS)}")
    loose = [name for name in MODULES if name not in (ENTRY, FACE) and name.split(".")[1] not in FOLDERS]
    assert not loose, f"put these in the folder of their layer: {loose}"


def test_no_import_runs_up_a_layer():
    upward = [f"{described(a)} -> {described(b)}"
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
    assert floors(GRAPH)["cctest.__main__"] > floors(GRAPH)["cctest.base.errors"]


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_a_circle(graph, expected):
    assert cycles(graph) == expected


# What a guest imports to make runs (cctest guest-run PLAN, then each capture's start): under
# emulation every import costs host time (pandas alone took 1.75 s of a UML guest's 10 s to its first
# run), and its tables are made on the host afterwards.
GUEST_RUN_PATH = ["cctest.cli.main", "cctest.run.session", "cctest.run.runner", "cctest.run.doctor",
                  "cctest.host.net.topology", "cctest.host.net.traffic", "cctest.host.net.schedule",
                  "cctest.host.captures", "cctest.host.journal", "cctest.host.rundir", "cctest.host.tracefs",
                  "cctest.host.cgroup", "cctest.host.vmtime", "cctest.model.scenario", "cctest.model.plan",
                  "cctest.model.guestplan",
                  "cctest.kernel.kmod", "cctest.kernel.modsource"]
HOST_ONLY = ("pandas", "numpy", "pyarrow", "plotly")


def test_the_guest_run_path_imports_no_table_library():
    code = (f"import importlib, sys\nfor m in {GUEST_RUN_PATH!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HOST_ONLY!r} and '.' not in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# Every file a UML guest loads is system calls at guest time, and some fail (each costs a
# microsecond of guest time in time-travel mode): one module more on the run path moves a seeded
# run's time zero and with it every table. The list is the run path's cctest modules; changing it
# changes every seeded UML run's bytes, so it is changed on purpose (and docs/uml.md's determinism
# holds per code version).
GUEST_MODULES = REPO / "tests" / "fixtures" / "guest_run_path_modules.txt"


def test_the_guest_run_path_loads_the_modules_it_always_has():
    code = (f"import importlib, sys\nfor m in {GUEST_RUN_PATH!r}: importlib.import_module(m)\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'cctest')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.split() == GUEST_MODULES.read_text().split()
