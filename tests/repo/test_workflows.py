"""The nightly workflow and the Slurm example: linted, and the jobs wired as docs/scale-out.md describes."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from tests import REPO

WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"


def tool(name: str) -> str:
    """A linter from scripts/setup.sh; `make test` (CCTEST_REQUIRE_VM=1) never skips for want of it."""
    found = shutil.which(name) or (str(REPO / ".venv" / "bin" / name) if (REPO / ".venv" / "bin" / name).exists()
                                   else None)
    if not found:
        if os.environ.get("CCTEST_REQUIRE_VM") == "1":
            pytest.fail(f"{name} missing: scripts/setup.sh installs it")
        pytest.skip(f"{name} not installed (scripts/setup.sh installs it)")
    return found


def test_workflows_pass_actionlint():
    result = subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck")], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_slurm_scripts_pass_shellcheck():
    scripts = sorted((REPO / "examples" / "slurm").iterdir())
    assert {p.name for p in scripts} >= {"shards.sbatch", "merge.sbatch", "submit.sh"}
    result = subprocess.run([tool("shellcheck"), "-s", "bash", *map(str, scripts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_nightly_shards_merge_and_gates_on_claims():
    flow = yaml.safe_load(WORKFLOW.read_text())
    jobs = flow["jobs"]
    shard_steps = " ".join(str(s.get("run", "")) for s in jobs["shard"]["steps"])
    assert '--shard "${{ matrix.shard }}/${{ strategy.job-total }}"' in shard_steps
    uploads = [s for s in jobs["shard"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert uploads and "${{ matrix.shard }}" in uploads[0]["with"]["name"]  # unique per shard
    merge = jobs["merge"]
    assert merge["needs"] == "shard" and merge["if"] == "always()"
    runs = [str(s.get("run", "")) for s in merge["steps"]]
    assert any("cctest report --compare previous runs" in r for r in runs)
    # the last step gates: `cctest check` exits 3 on a failed claim, after the report was kept
    assert "cctest check runs" in runs[-1] and "--no-fail" not in runs[-1]
    kept = [s for s in merge["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert {s["with"]["name"] for s in kept} == {"nightly-report", "nightly-runs"}
