"""What caps each flow's inflight, from the raw `ss -ti` samples of run directories (100 ms apart):
cwnd (unacked within 2 packets of cwnd), the socket's state (Recovery/Loss), and the sizes
against the flow's own model: cwnd and unacked in BDPs of the flow's BtlBw x RTprop (bbr info),
and the pacing rate over BtlBw.

usage: python results/targeted/binding.py DIR [DIR ...]   (DIR: run directories, any depth)
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pandas as pd

CA_RECOVERY = 3


def raw_ss(run: Path) -> Path | None:
    """The raw ss samples: raw/ss.jsonl in a run directory, ss_raw.jsonl.gz in the committed copies."""
    for path in (run / "raw" / "ss.jsonl", run / "ss_raw.jsonl.gz"):
        if path.exists():
            return path
    return None


def samples(run: Path) -> pd.DataFrame:
    rows = []
    path = raw_ss(run)
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    for line in text.splitlines():
        s = json.loads(line)
        info, bbr = s.get("info") or {}, s.get("bbr") or {}
        if not bbr or s.get("cc") == "cubic":
            continue  # iperf3's control connection, or no model to compare with
        bw_bytes = bbr["bbr_bw_lo"] + (bbr["bbr_bw_hi"] << 32)  # bytes per second
        mss = info["tcpi_snd_mss"]
        bdp = bw_bytes * bbr["bbr_min_rtt"] / 1e6 / mss if bbr["bbr_min_rtt"] else float("nan")
        rows.append({"flow": s["flow"], "sport": s["sport"], "cwnd": info["tcpi_snd_cwnd"],
                     "unacked": info["tcpi_unacked"], "ca_state": info["tcpi_ca_state"], "bdp": bdp,
                     "pacing_over_bw": info["tcpi_pacing_rate"] / bw_bytes if bw_bytes else float("nan"),
                     "cwnd_gain": bbr["bbr_cwnd_gain"] / 256, "bytes_acked": info["tcpi_bytes_acked"]})
    df = pd.DataFrame(rows)
    # the data socket of each flow: the one that acked the most
    main = df.groupby(["flow", "sport"])["bytes_acked"].max().reset_index()
    main = main.loc[main.groupby("flow")["bytes_acked"].idxmax(), ["flow", "sport"]]
    return df.merge(main, on=["flow", "sport"])


def binding(run: Path) -> pd.DataFrame:
    df = samples(run)
    df = df[df["bdp"] > 0]
    out = df.groupby("flow").apply(lambda g: pd.Series({
        "n": len(g),
        "cwnd_limited": (g["unacked"] >= g["cwnd"] - 2).mean(),
        "in_recovery": (g["ca_state"] >= CA_RECOVERY).mean(),
        "cwnd_bdp": (g["cwnd"] / g["bdp"]).median(),
        "unacked_bdp": (g["unacked"] / g["bdp"]).median(),
        "pacing_over_bw": g["pacing_over_bw"].median(),
        "gain_median": g["cwnd_gain"].median(),
        "bdp_pkts": g["bdp"].median(),
    }), include_groups=False)
    out.insert(0, "run", f"{run.parent.name}/{run.name}")
    return out


def main(args: list[str]) -> None:
    runs = sorted({p.parent for a in args for p in Path(a).rglob("meta.json") if raw_ss(p.parent)})
    table = pd.concat([binding(r) for r in runs if json.loads((r / "meta.json").read_text()).get("status") == "ok"])
    pd.set_option("display.width", 200)
    print(table.round(3).to_string())


if __name__ == "__main__":
    main(sys.argv[1:])
