"""scripts/keep-records.sh: a campaign's finished runs recorded and committed as they arrive, in a
repository of its own, from recorded run directories (tests/fixtures/runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests import REPO

SCRIPT = REPO / "scripts" / "keep-records.sh"
RUN = REPO / "tests" / "fixtures" / "runs" / "demo-cubic-bbr-20261122-232527-base-r0"


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    return repo


def finished(out, name, age_s=300.0, status=None, ingested=True):
    """A copy of the recorded run under out/demo/<name>, its files last changed `age_s` ago."""
    run = out / "demo" / name
    shutil.copytree(RUN, run)
    if status:
        meta = json.loads((run / "meta.json").read_text())
        (run / "meta.json").write_text(json.dumps({**meta, "status": status}))
    if not ingested:
        (run / "checks.json").unlink()
    then = time.time() - age_s
    for path in [run, *run.rglob("*")]:
        os.utime(path, (then, then))
    return run


def keep(repo, out, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CCTEST_PYTHON": sys.executable, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["bash", str(SCRIPT), "--once", str(out), "pending/demo-campaign", str(REPO), *args],
                          cwd=repo, capture_output=True, text=True, env=env, timeout=300)


def test_finished_runs_are_recorded_and_committed_and_the_others_wait(repo, tmp_path):
    out = tmp_path / "out"
    finished(out, "r0")
    finished(out, "r1", ingested=False)  # its session ended before writing its tables: ingested here
    finished(out, "r2", status="failed")
    finished(out, "r3", age_s=0)  # a guest may still be moving its files in
    result = keep(repo, out)
    assert result.returncode == 0, result.stderr
    recorded = sorted(p.parent.name for p in (repo / "pending" / "demo-campaign" / "demo").glob("*/record.json"))
    assert recorded == ["r0", "r1"]
    assert "2 new, 2 in pending/demo-campaign" in result.stdout
    assert git(repo, "status", "--porcelain") == ""
    assert sorted(git(repo, "show", "--name-only", "--format=", "HEAD").split()) == [
        "pending/demo-campaign/demo/r0/record.json", "pending/demo-campaign/demo/r1/record.json"]
    record = json.loads((repo / "pending" / "demo-campaign" / "demo" / "r0" / "record.json").read_text())
    assert record["meta"]["run_id"] == json.loads((RUN / "meta.json").read_text())["run_id"]

    head = git(repo, "rev-parse", "HEAD")
    again = keep(repo, out)
    assert again.returncode == 0 and again.stdout == "" and git(repo, "rev-parse", "HEAD") == head  # nothing new


def test_a_pending_path_outside_the_repository_is_refused(repo, tmp_path):
    for where in ("/tmp/elsewhere", "../elsewhere"):
        result = subprocess.run(["bash", str(SCRIPT), "--once", str(tmp_path), where], cwd=repo, capture_output=True,
                                text=True, env={**os.environ, "CCTEST_PYTHON": sys.executable})
        assert result.returncode == 2 and "a path inside this repository" in result.stderr
    assert git(repo, "log", "--oneline").count("\n") == 1
