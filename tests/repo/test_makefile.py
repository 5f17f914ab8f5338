"""`make test` runs the tests in two pytest sessions: the fast ones in parallel (pytest-xdist), then the
VM, cluster and container ones serially, so that the VM suite's session fixture boots its guests once.
Their two `-m` selections, read from the commands make would run, take every test exactly once: each
mark a test can carry (tests/conftest.py holds every test to its folder's, and to no other) is
selected by one of them and by no other. `make check` runs the first part's selection."""

from __future__ import annotations

import functools
import itertools
import re
import shlex
import shutil
import subprocess

import pytest
from _pytest.mark.expression import Expression  # pytest's own reading of -m (there since pytest 6)

from tests import REPO
from tests.conftest import MARK_OF_FOLDER, MARKS


@functools.cache
def pytest_commands(target: str) -> tuple[tuple[str, ...], ...]:
    """The pytest invocations of `make TARGET`, as make would run them (`make -n`: printed, not run)."""
    if shutil.which("make") is None:
        pytest.fail("make missing: scripts/setup.sh installs it (build-essential)")
    printed = subprocess.run(["make", "-n", "-s", target], cwd=REPO, capture_output=True, text=True, check=True).stdout
    commands = []
    for line in re.split(r"[;\n]|\|\|", printed.replace("\\\n", " ")):
        words = shlex.split(line)
        at = next((i for i, word in enumerate(words) if word.endswith("/pytest")), None)
        if at is not None:
            commands.append(tuple(words[at + 1:]))
    return tuple(commands)


def option(args: tuple[str, ...], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def selects(expression: str, marks: set[str]) -> bool:
    return Expression.compile(expression).evaluate(lambda name, **_: name in marks)


@pytest.fixture
def mark_sets(pytestconfig) -> list[set[str]]:
    """Every set of the registered marks (pyproject.toml) a test could carry; the folders' among them."""
    registered = [line.split(":")[0].split("(")[0].strip() for line in pytestconfig.getini("markers")]
    assert set(MARKS) <= set(registered) and set(MARK_OF_FOLDER.values()) <= set(MARKS), registered
    return [set(chosen) for n in range(len(registered) + 1) for chosen in itertools.combinations(registered, n)]


def test_make_test_runs_the_fast_tests_in_parallel_then_the_rest_serially():
    assert len(pytest_commands("test")) == 2, pytest_commands("test")
    fast, slow = pytest_commands("test")
    assert option(fast, "-n") is not None and option(fast, "-m") is not None, fast
    assert "-n" not in slow and "--numprocesses" not in slow and "--dist" not in slow, slow
    assert {"-v", "-rs"} <= set(slow), slow


def test_the_two_parts_take_every_test_exactly_once(mark_sets):
    parts = [option(args, "-m") for args in pytest_commands("test")]
    assert len(parts) == 2 and None not in parts, parts  # a part without -m would run everything
    for marks in mark_sets:
        taken = [part for part in parts if selects(part, marks)]
        assert len(taken) == 1, f"a test marked {sorted(marks) or 'with none'} is taken by {taken or 'no part'}"


def test_the_serial_part_holds_every_vm_and_container_test():
    slow = option(pytest_commands("test")[-1], "-m")
    assert slow is not None
    assert all(selects(slow, {mark}) for mark in MARKS) and not selects(slow, set())


def test_make_check_runs_the_fast_part_in_parallel():
    assert len(pytest_commands("check")) == 1, pytest_commands("check")
    (check,), (fast, _) = pytest_commands("check"), pytest_commands("test")
    assert option(check, "-m") == option(fast, "-m") and option(check, "-n") == option(fast, "-n")
