"""A seeded UML run repeats exactly wherever it is made: the same scenario and seed, run once from
this checkout into one --out and once from a copy of the checkout under /tmp (which the guest's own
/tmp would hide) into another --out of another length, give the same per-flow bytes and
retransmissions, ports, ss samples, per-ACK tcp_probe table and qdisc samples (docs/uml.md,
"Determinism"). CUBIC against BBR: two flows, so fq's flow hashing, the ephemeral ports and BBR's
random cycle phase all take part."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests import REPO
from tests.vm.harness import require_uml_kernel

pytestmark = pytest.mark.vm

SEED = 11
EXPERIMENTS = {
    "defaults": {"link": {"rate_mbps": 20, "rtt_ms": 20, "buffer_bdp": 2}, "duration_s": 6, "seed": SEED,
                 "capture": {"ss_interval_ms": 100, "qdisc_interval_ms": 100, "tcp_probe": True, "pcap": False}},
    "scenarios": {"uml-repeat": {"flows": [{"cc": "cubic"}, {"cc": "bbr"}]}},
}


@pytest.fixture(scope="module")
def two_runs():
    require_uml_kernel()
    root = REPO / "build" / "vm-tests-uml-determinism" / time.strftime("%Y%m%d-%H%M%S")
    root.mkdir(parents=True)
    elsewhere = Path(tempfile.mkdtemp(prefix="cctest-a-checkout-somewhere-else-"))
    try:
        copy = elsewhere / "cctest"
        shutil.copytree(REPO, copy, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", "build", "results", "records", "reports", ".venv", "__pycache__", ".*_cache"))
        places = [(REPO, root / "out"), (copy, elsewhere / "another" / "output-directory")]
        runs = []
        for checkout, out in places:
            experiments = out.parent / f"experiments-{len(runs)}.yaml"
            experiments.parent.mkdir(parents=True, exist_ok=True)
            experiments.write_text(yaml.safe_dump(EXPERIMENTS))
            # The same commit recorded for both (the copy has no git history): only the places differ.
            env = {**os.environ, "CCTEST_GIT_COMMIT": "0" * 40}
            result = subprocess.run([sys.executable, "-m", "cctest", "run", "uml-repeat", "-f", str(experiments),
                                     "--vm", "--engine", "uml", "--out", str(out)], cwd=checkout, env=env,
                                    capture_output=True, text=True)
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
            (run,) = [p.parent for p in out.rglob("meta.json")]
            kept = root / f"run-{len(runs)}"
            shutil.copytree(run, kept)
            runs.append(kept)
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    return runs


def _table(run: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(run / f"{name}.parquet").drop(columns="run_id")


def test_both_guests_booted_with_the_scenarios_seed(two_runs):
    for run in two_runs:
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "ok", meta["error"]
        assert meta["seed"] == SEED and meta["engine"]["rng_seed"] == SEED


def test_per_flow_bytes_retransmissions_and_ports_repeat(two_runs):
    first, second = (_table(run, "flows") for run in two_runs)
    columns = ["flow", "cc", "local_port", "bytes_sent", "bytes_received", "retransmits", "max_snd_cwnd_bytes"]
    pd.testing.assert_frame_equal(first[columns], second[columns])
    assert (first["bytes_received"] > 0).all()


def test_the_ss_tcp_probe_and_qdisc_tables_repeat(two_runs):
    for name in ("ss", "tcp_probe", "qdisc"):
        first, second = (_table(run, name) for run in two_runs)
        assert len(first) > 50, name
        pd.testing.assert_frame_equal(first, second, obj=name)
