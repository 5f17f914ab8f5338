"""The style and the types are held by tools: ruff (its rules in pyproject.toml) finds nothing in the
package, the tests and the benchmarks, mypy (its settings there too) nothing in the package.
`make test` (CCTEST_REQUIRE_VM=1) never skips for want of either."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from tests import REPO


def ruff() -> list[str]:
    """The ruff beside this interpreter (the `test` extra installs it), else one on PATH."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    if found:
        return [found]
    if os.environ.get("CCTEST_REQUIRE_VM") == "1":
        pytest.fail("ruff missing: scripts/setup.sh installs it (the `test` extra)")
    pytest.skip("ruff not installed (scripts/setup.sh installs it, with the `test` extra)")


def mypy() -> list[str]:
    """The mypy beside this interpreter (the `test` extra installs it, with the stubs it reads)."""
    if importlib.util.find_spec("mypy") is not None:
        return [sys.executable, "-m", "mypy"]
    if os.environ.get("CCTEST_REQUIRE_VM") == "1":
        pytest.fail("mypy missing: scripts/setup.sh installs it (the `test` extra)")
    pytest.skip("mypy not installed (scripts/setup.sh installs it, with the `test` extra)")


def test_ruff_finds_nothing():
    result = subprocess.run([*ruff(), "check", "--no-cache", "cctest", "tests", "bench"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing(tmp_path):
    # the files and the flags are pyproject.toml's; a fresh cache: no stale result stands in for a check
    result = subprocess.run([*mypy(), "--cache-dir", str(tmp_path / "mypy-cache")], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
