"""The nightly workflow and the Slurm example: linted, and the jobs wired as docs/scale-out.md describes."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from tests import REPO

WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"
IMAGE_ACTION = REPO / ".github" / "actions" / "cctest-image" / "action.yml"


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
    assert any("$CCTEST report --compare previous runs" in r for r in runs)
    # the last step gates: `cctest check` exits 3 on a failed claim, after the report was kept
    assert "$CCTEST check runs" in runs[-1] and "--no-fail" not in runs[-1]
    kept = [s for s in merge["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert {s["with"]["name"] for s in kept} == {"nightly-report", "nightly-runs"}


def test_nightly_runs_on_hosted_runners_in_the_image_unprivileged_unless_a_lab_switches():
    """The default: ubuntu-latest, cctest in the project's image, UML, no privileges; the repository
    variable (or the input) CCTEST_NIGHTLY_RUNNER=self-hosted moves every job to the lab's runner."""
    flow = yaml.safe_load(WORKFLOW.read_text())
    jobs = flow["jobs"]
    assert flow["env"]["RUNNER_KIND"] == "${{ inputs.runner || vars.CCTEST_NIGHTLY_RUNNER || 'hosted' }}"
    assert flow[True]["workflow_dispatch"]["inputs"]["runner"]["options"] == ["hosted", "self-hosted"]  # `on`
    for name in ("shard", "merge"):
        runs_on = jobs[name]["runs-on"]
        assert "'self-hosted'" in runs_on and runs_on.rstrip("} ").endswith("|| 'ubuntu-latest'"), runs_on
        hosted = [s for s in jobs[name]["steps"] if s.get("if") == "env.RUNNER_KIND != 'self-hosted'"]
        assert [s["uses"] for s in hosted] == ["./.github/actions/cctest-image"], name
    assert jobs["image"]["runs-on"] == "ubuntu-latest" and "!= 'self-hosted'" in jobs["image"]["if"]
    assert jobs["tests"]["runs-on"] == ["self-hosted", "linux", "privileged"]
    assert "== 'self-hosted'" in jobs["tests"]["if"]
    shard_run = " ".join(str(s.get("run", "")) for s in jobs["shard"]["steps"])
    assert "$CCTEST run $RUN_FLAGS $SUITES" in shard_run

    action = yaml.safe_load(IMAGE_ACTION.read_text())
    script = " ".join(str(s.get("run", "")) for s in action["runs"]["steps"])
    assert "CCTEST=docker run --rm --tmpfs /dev/shm:rw,exec," in script and "RUN_FLAGS=--vm --engine uml" in script
    (command,) = [line for line in script.splitlines() if "CCTEST=docker run" in line]
    for privilege in ("--privileged", "--cap-add", "--device", "--pid", "--network", "--ipc", "/lib/modules"):
        assert privilege not in command, privilege
