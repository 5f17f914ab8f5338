"""The before/after table of results/targeted/README.md, from the run directories (cctest's own
metrics and summary code; mean and 95 % CI over the repetitions with stats.mean_ci95).

usage: python results/targeted/table.py LABEL=DIR [LABEL=DIR ...]
Each DIR holds run directories (any depth); LABEL names the code they ran (before, after).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from cctest.analysis import stats
from cctest.analysis.judge import Measure, analyse
from cctest.analysis.load import find_run_dirs, load_runs

MSS = 1448  # payload bytes per segment in these runs (ss mss; iperf3 over 1500-byte MTU)


def per_run(label: str, root: str) -> pd.DataFrame:
    skipped: list[str] = []
    runs = [r for r in load_runs(find_run_dirs(root, skipped), skipped) if r.meta.get("status") == "ok"]
    kept, results, summary = analyse(runs, Measure(), skipped)
    for s in skipped:
        print(f"skipped: {s}", file=sys.stderr)
    rows = []
    for run, res, (_, r) in zip(kept, results, summary.runs.iterrows()):
        flows = pd.DataFrame(res["flows"])
        groups = {g["cc"]: g for g in res["groups"]}
        delivered = flows["bytes_received"].sum() / MSS
        point = ",".join(f"{k}={v}" for k, v in sorted((run.meta.get("matrix") or {}).items()))
        scenario = run.meta.get("scenario") + (f" [{point}]" if point else "")  # one row per matrix point
        row = {"label": label, "scenario": scenario, "rep": run.meta.get("repetition"),
               "short_rtt_share": r.get("short_rtt_flow_share"), "jain": r.get("jain"),
               "jain_steady": r.get("jain_steady"), "loss_rate": r.get("bottleneck_loss_rate"),
               "retrans_per_delivered": flows["retransmits"].sum() / delivered if delivered else np.nan,
               "throughput_mbps": r.get("throughput_mbps"), "mean_queue_bdp": r.get("mean_queue_bdp")}
        for cc in ("bbr_modest", "bbr_acw", "bbr_shallow"):
            if cc in groups and len(groups) > 1:
                row[f"share({cc})"] = groups[cc]["share"]
        if "bbr_modest" in set(flows["cc"]):
            row["modest_mean_cwnd"] = flows.loc[flows["cc"] == "bbr_modest", "mean_cwnd_pkts"].mean()
        if len(flows) >= 2:
            row["cwnd_flow0"], row["cwnd_flow1"] = flows["mean_cwnd_pkts"].iloc[0], flows["mean_cwnd_pkts"].iloc[1]
        rows.append(row)
    return pd.DataFrame(rows)


def main(args: list[str]) -> None:
    table = pd.concat([per_run(*a.split("=", 1)) for a in args], ignore_index=True)
    pd.set_option("display.width", 250)
    print(table.sort_values(["scenario", "label", "rep"]).to_string(index=False, float_format="%.4f"))
    print()
    metrics_ = [c for c in table.columns if c not in ("label", "scenario", "rep")]
    lines = ["| scenario | code | n | " + " | ".join(metrics_) + " |", "|" + "---|" * (len(metrics_) + 3)]
    for (scen, label), d in table.groupby(["scenario", "label"]):
        cells = []
        for m in metrics_:
            mean, ci, n = stats.mean_ci95(d[m].astype(float))
            cells.append("—" if not n else f"{mean:.3f} ± {ci:.3f}" if n > 1 else f"{mean:.3f}")
        lines.append(f"| {scen} | {label} | {len(d)} | " + " | ".join(cells) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
