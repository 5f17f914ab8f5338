"""Bottleneck loss rate in a time window (default 10 s to the end: past Startup's loss burst), from
the qdisc samples of run directories, next to cctest's whole-run figure.

usage: python results/targeted/steady_loss.py [--from S] DIR [DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from cctest.analysis import derived as D


def window_loss(run: Path, t0: float) -> dict:
    bq = D.bottleneck_samples(pd.read_parquet(run / "qdisc.parquet"))
    bq = bq.sort_values("t_s")
    start = bq[bq["t_s"] >= t0].iloc[0]
    end = bq.iloc[-1]
    drops, sent = end["drops"] - start["drops"], end["sent_pkts"] - start["sent_pkts"]
    return {"run": f"{run.parent.parent.name}/{run.parent.name}/{run.name}", "from_s": float(start["t_s"]),
            "to_s": float(end["t_s"]), "drops": int(drops), "sent": int(sent),
            "loss_rate": drops / (drops + sent) if drops + sent else float("nan")}


def main(args: list[str]) -> None:
    t0 = 10.0
    if args[:1] == ["--from"]:
        t0, args = float(args[1]), args[2:]
    runs = sorted({p.parent for a in args for p in Path(a).rglob("qdisc.parquet")})
    rows = [window_loss(r, t0) for r in runs if json.loads((r / "meta.json").read_text()).get("status") == "ok"]
    print(pd.DataFrame(rows).to_string(index=False, float_format="%.4f"))


if __name__ == "__main__":
    main(sys.argv[1:])
