"""Shared by the VM benchmarks: run a generated experiments file with `cctest run --vm`, and read
back what decides whether an emulated run was faithful to its configuration."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cctest.analysis.derived import acked_within, payload_fraction  # noqa: E402
from cctest.analysis.stats import jain_index  # noqa: E402

SLOW_START_S = 3.0  # left out of "steady" goodput: slow start and its first recovery
FAITHFUL_GOODPUT = 0.97  # of payload capacity, over the steady part
FAITHFUL_RTT = 0.02  # smallest ping within 2 % of the configured RTT


def vm_bench_parser(doc: str, out: str) -> argparse.ArgumentParser:
    """The options every VM benchmark takes: flow duration, output directory, and --reuse (print
    from an earlier --out without running anything)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--reuse", action="store_true")
    return parser


def cctest_run(experiments: dict, scenarios: list[str], out: Path, args: list[str],
               env: dict[str, str | None] | None = None) -> float:
    """Write the experiments file into `out`, run the scenarios there, return the wall seconds.
    `env`: variables to set for the run (None: unset it), on top of this process's."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "experiments.yaml"
    path.write_text(yaml.safe_dump(experiments, sort_keys=False))
    child = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            child.pop(name, None)
        else:
            child[name] = value
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "cctest", "run", *scenarios, "-f", str(path), "--out", str(out), "--vm",
                    *args], cwd=REPO, check=True, env=child)
    return time.monotonic() - started


def run_dirs(out: Path) -> list[Path]:
    return sorted(path.parent for path in out.rglob("meta.json"))


def figures(path: Path) -> dict:
    """One run's fidelity and outcome."""
    meta = json.loads((path / "meta.json").read_text())
    checks = {c["name"]: c for c in json.loads((path / "checks.json").read_text())["checks"]}
    flows = pd.read_parquet(path / "flows.parquet")
    ss = pd.read_parquet(path / "ss.parquet")
    ping = pd.read_parquet(path / "ping.parquet")
    rate = meta["link"]["rate_mbps"]
    start = min(f["launched_s"] for f in meta["flows"]) + SLOW_START_S
    end = max(f["launched_s"] + f["duration_s"] for f in meta["flows"])
    acked = sum(acked_within(ss, f["flow"], start, end) or 0.0 for f in meta["flows"])
    steady = acked * 8 / (end - start) / (rate * 1e6 * payload_fraction(meta["link"]["mtu"]))
    rtt_err = max(abs(ping[ping["flow"] == f["flow"]]["rtt_ms"].min() / f["rtt_ms"] - 1) for f in meta["flows"])
    received = flows["bytes_received"].astype(float)
    by_cc = flows.groupby(flows["cc"].astype(str))["bytes_received"].sum().astype(float)
    vm = meta.get("vm") or {}
    return {
        "run": path.name, "scenario": meta["scenario"], "rate_mbps": rate, "flows": len(meta["flows"]),
        "repetition": meta["repetition"], "seed": meta["seed"], "matrix": meta["matrix"],
        "steady_goodput": steady, "rtt_err": rtt_err, "cpu_busy": checks.get("cpu_busy", {}).get("measured"),
        "faithful": steady >= FAITHFUL_GOODPUT and rtt_err <= FAITHFUL_RTT,
        "jain": jain_index(received), "shares": (by_cc / by_cc.sum()).round(3).to_dict(),
        "goodput_mbps": (received * 8 / flows["duration_s"] / 1e6).round(2).tolist(),
        "retransmits": flows["retransmits"].astype(int).tolist(),
        "flows_guest_s": vm.get("phases", {}).get("flows", {}).get("guest_s", meta["phase_s"].get("flows")),
        "flows_wall_s": vm.get("phases", {}).get("flows", {}).get("wall_s"),
        "wall_per_guest": vm.get("wall_per_guest"),
        "clock": vm.get("clock"), "icount_shift": vm.get("icount_shift"),
    }
