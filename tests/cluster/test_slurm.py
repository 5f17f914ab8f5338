"""examples/slurm/ on a real Slurm cluster: a single-node cluster started by the test on this machine
(tests/cluster/slurm_cluster.py), `submit.sh 3` for a sweep of three seeded UML runs (three array tasks of
one CPU and one guest each, then the merge job on their output), and the merged runs compared with
a local `cctest run` of the same sweep: every table and every raw capture identical. Submitted
again, the array skips the shards that completed; with two shards then cut short (one after its run,
one in the middle of it), a third submission goes on where they stopped (a clean checkout: the
finished run kept, the missing one made again; else both rerun whole). The test prints how long the
cluster took to start, the shards and the local run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests import REPO
from tests.cluster import slurm_cluster
from tests.vm.harness import require_uml_kernel

pytestmark = pytest.mark.vm

CCTEST = REPO / ".venv" / "bin" / "cctest"  # what the sbatch scripts run, relative to the checkout
SHARDS = 3
SCENARIO = "slurm-sweep"
EXPERIMENTS = {
    "defaults": {"link": {"rate_mbps": 20, "rtt_ms": 20, "buffer_bdp": 2}, "duration_s": 5, "seed": 31,
                 "capture": {"ss_interval_ms": 100, "qdisc_interval_ms": 100, "tcp_probe": True, "pcap": False}},
    # three repetitions, seeds 31, 32, 33: one run per array task; a claim for the merge job to judge
    "scenarios": {SCENARIO: {"flows": [{"cc": "cubic"}, {"cc": "bbr"}], "repetitions": SHARDS,
                             "expect": [{"claim": "utilisation >= 0.8", "sanity": True}]}},
}
JOBS_TIMEOUT_S = 1800


def _unavailable(reason: str) -> None:
    if os.environ.get("CCTEST_REQUIRE_VM") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _say(request, line: str) -> None:
    """A line on the terminal whatever pytest captures (the figures this test reports)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if capture is None or reporter is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


def _runs(out: Path) -> dict[str, Path]:
    """The run directories under `out`, by scenario and label-repetition (what a run's id adds to its
    time stamp): the key a run has wherever and whenever it was made."""
    runs = {}
    for meta in out.rglob("meta.json"):
        if any(part.startswith(".") for part in meta.relative_to(out).parts):
            continue  # a guest's home (.uml-N), not a run
        run_id = json.loads(meta.read_text())["run_id"]
        key = f"{meta.parent.parent.name}/{run_id.split('-', 2)[2]}"
        assert key not in runs, f"two runs of {key} under {out}: {runs[key]}, {meta.parent}"
        runs[key] = meta.parent
    return runs


def _states(cluster: slurm_cluster.Cluster, job_id: str) -> dict[str, str]:
    result = cluster.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i %T")
    return dict(line.split() for line in result.stdout.splitlines())


def _submit(cluster: slurm_cluster.Cluster, jobs: Path, env: dict[str, str]) -> tuple[str, str, float]:
    """submit.sh SHARDS, waited for: the array's and the merge's job ids, and the wall time."""
    began = time.monotonic()
    result = subprocess.run(["bash", str(REPO / "examples" / "slurm" / "submit.sh"), str(SHARDS)], cwd=jobs,
                            env={**cluster.env(), **env}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    array, merge = result.stdout.split()
    cluster.wait_for_jobs(JOBS_TIMEOUT_S)
    return array, merge, time.monotonic() - began


def _job_logs(jobs: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(jobs.glob("slurm-*.out")))


@pytest.fixture(scope="module")
def sweep(request):
    require_uml_kernel()
    if missing := slurm_cluster.missing():
        _unavailable(f"Slurm and munge are not installed (missing {', '.join(missing)}: Debian's slurm-wlm and "
                     "munge; scripts/setup.sh installs them)")
    if not CCTEST.exists():
        _unavailable(f"{CCTEST} is missing: the sbatch scripts run the checkout's .venv (scripts/setup.sh)")
    # Kept after the session (pytest's tmp dirs are pruned), so a failure can be inspected.
    root = REPO / "build" / "vm-tests-slurm" / time.strftime("%Y%m%d-%H%M%S")
    jobs = root / "jobs"  # the jobs' working directory: their slurm-*.out
    jobs.mkdir(parents=True)
    experiments = root / "experiments.yaml"
    experiments.write_text(yaml.safe_dump(EXPERIMENTS))
    merged = root / "slurm-runs"
    found: dict = {"root": root, "jobs": jobs, "merged": merged}

    began = time.monotonic()
    local = subprocess.run([str(CCTEST), "run", SCENARIO, "-f", str(experiments), "--vm", "--engine", "uml",
                            "--out", str(root / "local")], cwd=REPO, capture_output=True, text=True)
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    found["local_s"] = time.monotonic() - began
    found["local"] = _runs(root / "local")
    # what the merge job makes of the shards, made of the local runs
    for command in (["report", "-o", str(root / "local" / "report.html"), "--no-fail"],
                    ["check", "-o", str(root / "local" / "claims.json")]):
        result = subprocess.run([str(CCTEST), command[0], "-f", str(experiments), str(root / "local"), *command[1:]],
                                cwd=REPO, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    cluster = slurm_cluster.Cluster()
    try:
        found["start_s"] = cluster.start()
        _say(request, f"\nslurm: the single-node cluster ({cluster.cpus} CPUs) took {found['start_s']:.1f} s to "
                      "start (daemons up, node idle)")
        env = {"CCTEST_CHECKOUT": str(REPO), "CCTEST_FILE": str(experiments), "CCTEST_SUITES": SCENARIO,
               "CCTEST_OUT": str(merged)}
        array, merge, found["jobs_s"] = _submit(cluster, jobs, env)
        found["states"] = {**_states(cluster, array), **_states(cluster, merge)}
        found["logs"] = _job_logs(jobs)
        found["slurm"] = _runs(merged)
        found["files"] = sorted(str(p.relative_to(merged)) for p in merged.rglob("*") if p.is_file())
        _say(request, f"slurm: {SHARDS} array tasks and the merge job took {found['jobs_s']:.0f} s; the same "
                      f"sweep run locally (-j {os.cpu_count()}) {found['local_s']:.0f} s")

        for log in jobs.glob("slurm-*.out"):
            log.rename(log.with_name(f"first-{log.name}"))
        array, merge, found["again_s"] = _submit(cluster, jobs, env)
        found["again_states"] = {**_states(cluster, array), **_states(cluster, merge)}
        found["again_logs"] = _job_logs(jobs)
        found["again"] = _runs(merged)
        _say(request, f"slurm: submitted again, it took {found['again_s']:.0f} s")

        # a copy of the output with shard 2 cut after its run (no marker) and shard 3 in the middle of it
        # (no run directory either), submitted again into the copy
        for log in jobs.glob("slurm-*.out"):
            log.rename(log.with_name(f"again-{log.name}"))
        cut_out = found["cut_out"] = root / "slurm-runs-cut"
        shutil.copytree(merged, cut_out, symlinks=True)
        (cut_out / "shard-2" / "shard-complete").unlink()
        found["cut_key"], cut = next((k, p) for k, p in _runs(cut_out).items() if p.is_relative_to(cut_out / "shard-3"))
        shutil.rmtree(cut)
        (cut_out / "shard-3" / "shard-complete").unlink()
        found["cut"] = _runs(cut_out)
        found["clean_checkout"] = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                                  "--untracked-files=no"], capture_output=True, text=True).stdout == ""
        array, merge, found["resumed_s"] = _submit(cluster, jobs, {**env, "CCTEST_OUT": str(cut_out)})
        found["resumed_states"] = {**_states(cluster, array), **_states(cluster, merge)}
        found["resumed_logs"] = _job_logs(jobs)
        found["resumed"] = _runs(cut_out)
        _say(request, f"slurm: with two shards cut short, submitted again, it took {found['resumed_s']:.0f} s")
    finally:
        cluster.stop(keep_logs=root / "slurm-logs")
    assert not cluster.dir.exists()
    figures = {name: round(found[name], 1) for name in ("start_s", "jobs_s", "again_s", "resumed_s", "local_s")}
    (root / "figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    return found


def test_every_job_completed_and_the_merge_wrote_its_report(sweep):
    assert sweep["start_s"] < 60
    assert len(sweep["states"]) == SHARDS + 1, sweep["states"]
    assert set(sweep["states"].values()) == {"COMPLETED"}, f"{sweep['states']}\n{sweep['logs']}"
    for name in ("report.html", "claims.json"):
        assert name in sweep["files"], sweep["files"]
    for index in range(1, SHARDS + 1):
        assert f"shard-{index}/shard-complete" in sweep["files"], sweep["files"]
        assert sum(key.startswith(f"shard-{index}/") and key.endswith("/meta.json") for key in sweep["files"]) == 1


def test_the_merged_runs_equal_a_local_run_of_the_same_sweep(sweep):
    local, slurm = sweep["local"], sweep["slurm"]
    assert sorted(slurm) == sorted(local) and len(local) == SHARDS
    for key, run in local.items():
        theirs = slurm[key]
        mine_meta, their_meta = (json.loads((r / "meta.json").read_text()) for r in (run, theirs))
        assert mine_meta["status"] == their_meta["status"] == "ok", (key, mine_meta["error"], their_meta["error"])
        assert mine_meta["seed"] == their_meta["seed"]
        tables = sorted(p.name for p in run.glob("*.parquet"))
        assert "flows.parquet" in tables and tables == sorted(p.name for p in theirs.glob("*.parquet"))
        for name in tables:
            pd.testing.assert_frame_equal(pd.read_parquet(run / name).drop(columns="run_id"),
                                          pd.read_parquet(theirs / name).drop(columns="run_id"), obj=f"{key} {name}")
        flows = pd.read_parquet(run / "flows.parquet")
        assert (flows["bytes_received"] > 0).all(), key
        raw = sorted(p.relative_to(run) for p in (run / "raw").rglob("*") if p.is_file())
        assert raw and raw == sorted(p.relative_to(theirs) for p in (theirs / "raw").rglob("*") if p.is_file())
        for path in raw:
            assert (run / path).read_bytes() == (theirs / path).read_bytes(), f"{key}: {path} differs"


def test_the_merged_report_and_verdicts_equal_the_local_runs(sweep):
    local, merged = sweep["root"] / "local", sweep["merged"]
    mine, theirs = (pd.read_csv(d / "report.summary.csv").drop(columns="run_id") for d in (local, merged))
    order = ["level", "scenario", "repetition", "flow"]
    mine, theirs = (t.sort_values(order).reset_index(drop=True) for t in (mine, theirs))
    assert len(mine[mine["level"] == "run"]) == SHARDS
    pd.testing.assert_frame_equal(mine, theirs)
    mine, theirs = (json.loads((d / "claims.json").read_text()) for d in (local, merged))
    assert theirs["statuses"]["pass"] == 1, theirs["results"]
    assert [c["values"] for c in theirs["claims"]] == [c["values"] for c in mine["claims"]]


def test_a_resubmitted_array_skips_the_complete_shards(sweep):
    assert set(sweep["again_states"].values()) == {"COMPLETED"}, f"{sweep['again_states']}\n{sweep['again_logs']}"
    assert sweep["again_logs"].count("already complete") == SHARDS, sweep["again_logs"]
    assert {key: str(path) for key, path in sweep["again"].items()} == {
        key: str(path) for key, path in sweep["slurm"].items()}
    assert not Path(f"{sweep['merged']}.incomplete").exists()


def test_a_shard_cut_short_goes_on_where_it_stopped(sweep):
    states, logs = sweep["resumed_states"], sweep["resumed_logs"]
    out, before, after = sweep["cut_out"], sweep["cut"], sweep["resumed"]
    assert set(states.values()) == {"COMPLETED"}, f"{states}\n{logs}"
    assert logs.count("already complete") == 1, logs  # shard 1 only
    assert sorted(after) == sorted(sweep["local"]) and sweep["cut_key"] not in before
    if sweep["clean_checkout"]:
        assert logs.count(", resumed") == 2, logs
        said = " ".join(logs.split())  # the console wraps its lines in a log
        assert "--resume: 1 of 1 runs are in" in said and "--resume: 0 of 1 runs are in" in said, logs
        kept = [key for key, path in before.items() if path.is_relative_to(out / "shard-2")]
        assert kept and all(after[key] == before[key] for key in kept)  # the finished run, where it was
        assert not Path(f"{out}.incomplete").exists()
    else:  # uncommitted changes: --resume would refuse, so both run again whole
        moved = sorted(p.name.split(".")[0] for p in Path(f"{out}.incomplete").iterdir())
        assert moved == ["shard-2", "shard-3"], moved
    # the run made again is the one the local sweep made with that seed
    key = sweep["cut_key"]
    mine, theirs = sweep["local"][key], after[key]
    for table in sorted(p.name for p in mine.glob("*.parquet")):
        pd.testing.assert_frame_equal(pd.read_parquet(mine / table).drop(columns="run_id"),
                                      pd.read_parquet(theirs / table).drop(columns="run_id"), obj=f"{key} {table}")


def test_the_cluster_left_nothing_running(sweep):
    leftovers = subprocess.run(["pgrep", "-f", str(sweep["merged"])], capture_output=True, text=True).stdout.split()
    assert leftovers == [], f"processes still working on {sweep['merged']}: {leftovers}"
