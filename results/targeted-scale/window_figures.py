"""Steady-state figures of run directories over a time window (default 60 s to the end), as 004
reads its trials (minutes 2-4 of 5), beside the suites' whole-run figures: the bottleneck's mean
and largest queue in BDP and each cc's share of the bytes delivered in the window.

usage: python results/targeted-scale/window_figures.py [--from S] DIR [DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from cctest.analysis import derived


def window_figures(run: Path, t0: float) -> dict:
    meta = json.loads((run / "meta.json").read_text())
    link = meta["link"]
    bdp_bytes = link["rate_mbps"] * 1e6 / 8 * link["rtt_ms"] / 1e3
    queue = derived.bottleneck_samples(pd.read_parquet(run / "qdisc.parquet"))
    queue = queue[queue["t_s"] >= t0]
    flows = pd.read_parquet(run / "flows.parquet")[["flow", "cc"]]
    tput = pd.read_parquet(run / "throughput.parquet")
    tput = tput[tput["t_s"] >= t0].merge(flows, on="flow")
    by_cc = tput.groupby("cc")["bytes"].sum()
    row = {"run": f"{run.parent.name}/{run.name}", "from_s": t0, "mean_queue_bdp": queue["backlog_bytes"].mean() / bdp_bytes,
           "max_queue_bdp": queue["backlog_bytes"].max() / bdp_bytes}
    row.update({f"share({cc})": b / by_cc.sum() for cc, b in by_cc.items()} if len(by_cc) > 1 else {})
    return row


def main(args: list[str]) -> None:
    t0 = 60.0
    if args[:1] == ["--from"]:
        t0, args = float(args[1]), args[2:]
    runs = sorted({p.parent for a in args for p in Path(a).rglob("meta.json")})
    rows = [window_figures(r, t0) for r in runs if json.loads((r / "meta.json").read_text()).get("status") == "ok"]
    print(pd.DataFrame(rows).to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main(sys.argv[1:])
