"""The README's table from the run directories here: per variant and code version, CUBIC's and the
variant's mean throughput, the variant's share of delivered bytes and the share of its segments it
retransmitted, mean ± 95 % Student-t
half-width over the repetitions, next to paper 003's Table 1 (first stage).

usage: python results/targeted-bbr3/summarize.py [RUN_DIR_ROOT]   (default: this directory)
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd

from cctest.analysis.stats import mean_ci95

# 003 Table 1, 1st stage: average throughput (Mbit/s) of Flow1 (CUBIC) and Flow2
PAPER = {"bbr2": (28.5, 18.6), "bbr3": (24.9, 22.1), "bbr3plus": (22.7, 24.5)}


def rows(root: Path) -> dict[tuple[str, str], list[tuple[float, float, float, float]]]:
    found: dict[tuple[str, str], list[tuple[float, float, float, float]]] = defaultdict(list)
    for meta_path in sorted(root.glob("*/*/meta.json")):
        meta = json.loads(meta_path.read_text())
        if meta.get("status") != "ok" or not (meta_path.parent / "flows.parquet").exists():
            continue  # a run that was cut short, or not ingested yet
        flows = pd.read_parquet(meta_path.parent / "flows.parquet").set_index("flow")
        duration = meta["flows"][1]["duration_s"]
        cubic, variant = (flows.loc[f, "bytes_received"] * 8 / duration / 1e6 for f in (0, 1))
        mss = pd.read_parquet(meta_path.parent / "ss.parquet")["mss"].dropna().iloc[-1]
        retransmitted = flows.loc[1, "retransmits"] / (flows.loc[1, "bytes_sent"] / mss) * 100
        # scenario dirs d4-before (commit e374f87), after-<cc> or d4-after (this tree)
        version = "before D4" if "before" in meta_path.parent.parent.name else "after D4"
        found[(meta["flows"][1]["cc"], version)].append((cubic, variant, variant / (cubic + variant), retransmitted))
    return found


def fmt(samples: list[float], digits: int = 1) -> str:
    mean, ci, _ = mean_ci95(samples)
    return f"{mean:.{digits}f} ± {ci:.{digits}f}"


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    print("| variant | code | n | CUBIC Mbit/s | variant Mbit/s | variant share | variant retransmitted % "
          "| paper: CUBIC, variant (share) |")
    print("|---|---|---|---|---|---|---|---|")
    for (cc, version), runs in sorted(rows(root).items()):
        cubic, variant, share, retransmitted = zip(*runs)
        p_cubic, p_variant = PAPER[cc]
        print(f"| {cc} | {version} | {len(runs)} | {fmt(cubic)} | {fmt(variant)} | {fmt(share, 3)} | {fmt(retransmitted, 2)} | "
              f"{p_cubic}, {p_variant} ({p_variant / (p_cubic + p_variant):.3f}) |")


if __name__ == "__main__":
    main()
