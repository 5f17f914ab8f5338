"""The style is held by a tool: ruff (its rules in pyproject.toml) finds nothing in the package, the
tests and the benchmarks. `make test` (CCTEST_REQUIRE_VM=1) never skips for want of ruff."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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


def test_ruff_finds_nothing():
    result = subprocess.run([*ruff(), "check", "--no-cache", "cctest", "tests", "bench"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
