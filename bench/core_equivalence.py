"""Is this project's BBRv1 core (modules/bbr1, hooks off) the kernel's bbr? Distributions over many
runs, on the virtual clock.

    .venv/bin/python bench/core_equivalence.py [--runs 10] [--rates 20,50] [--duration 15]
                                               [--out build/bench-core-equivalence] [--reuse]

One flow alone, 20 ms, a 5 BDP buffer, --runs repetitions each of `bbr` and `bbr1` per rate. Prints
per rate and sender the median [min, max] over the runs of each run's figures, and a two-sided
Mann-Whitney U p-value per figure (small: the two samples differ), the difference of the mean
median srtt with its 95 % bootstrap interval (what N runs can decide), then the Spearman rank
correlation, over all runs of a rate, between the model's bandwidth estimate and the share of
time spent queued.

Per run (`cctest.analysis.bbr_model.bbr_model_figures`, after slow start and Drain): delivered MB; srtt
p05 / p50 / p90; `queued`, the share of `ss -tin` samples with srtt above 1.5 x the base RTT; the
model's bandwidth estimate over the link's payload rate and the share of samples where it is more
than 3 % above it (`overestimated`: a rate the link cannot give); cwnd over the payload BDP; the
pacing margin; RTprop; the shares of samples in ProbeBW's 1.25 and 0.75 phases. Per rate it also
prints the Spearman correlation, over all runs, between `overestimated` and `queued`: what decides
how long a lone BBRv1 flow keeps a queue.
--reuse prints from an earlier --out without running anything.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
from scipy import stats

from cctest.analysis.bbr_model import bbr_model_figures
from cctest.model.record import Link
from fidelity import cctest_run, run_dirs, vm_bench_parser

SENDERS = ("bbr", "bbr1")  # the kernel's, this project's core
FIGURES = ("delivered", "srtt_min_ms", "srtt_p05_ms", "srtt_p50_ms", "srtt_p90_ms", "queued", "bw_over_capacity",
           "overestimated", "cwnd_over_bdp", "pacing_margin", "min_rtt_ms", "gain_1.25", "gain_0.75")


def experiments(rates: list[int], runs: int, duration_s: float) -> dict:
    return {"scenarios": {f"core-vs-kernel-{rate}": {
        "link": {"rate_mbps": rate, "rtt_ms": 20, "buffer_bdp": 5},
        "flows": [{"cc": "bbr"}],
        "duration_s": duration_s, "repetitions": runs, "seed": 1,
        # ss every 10 ms: every 100 ms aliases with ProbeBW's ~165 ms gain cycle
        "capture": {"tcp_probe": False, "pcap": False, "ss_interval_ms": 10},
        "matrix": {"flows.0.cc": list(SENDERS)},
    } for rate in rates}}


def figures(path: Path) -> dict:
    meta = json.loads((path / "meta.json").read_text())
    delivered = float(pd.read_parquet(path / "flows.parquet")["bytes_received"].sum()) / 1e6
    return {"rate": int(meta["link"]["rate_mbps"]), "cc": meta["flows"][0]["cc"], "run": path.name,
            "delivered": delivered,
            **bbr_model_figures(Link.model_validate(meta["link"]), pd.read_parquet(path / "ss.parquet"))}


def relative_difference(kernel, core) -> float:
    return core.mean() / kernel.mean() - 1


def summary(values: pd.Series) -> str:
    return f"{statistics.median(values):8.3f} [{values.min():.3f}, {values.max():.3f}]"


def main() -> None:
    parser = vm_bench_parser(__doc__, "build/bench-core-equivalence")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rates", default="20,50")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    if not args.reuse:
        cctest_run(experiments(rates, args.runs, args.duration), [f"core-vs-kernel-{r}" for r in rates],
                   args.out, [])
    table = pd.DataFrame([figures(path) for path in run_dirs(args.out)])
    for rate, runs in table.groupby("rate"):
        counts = runs["cc"].value_counts().to_dict()
        print(f"\n{rate} Mbit/s, one flow, 20 ms, 5 BDP; runs: {counts}")
        if min(counts.get(cc, 0) for cc in SENDERS) < 2:
            print("  (fewer than two runs of a sender: nothing to compare)")
            continue
        print(f"  {'figure':16s} {'kernel bbr: median [min, max]':>32s} "
          f"{'core bbr1: median [min, max]':>32s}  U test p")
        for name in FIGURES:
            kernel, core = (runs[runs["cc"] == cc][name] for cc in SENDERS)
            p = stats.mannwhitneyu(kernel, core, alternative="two-sided").pvalue
            print(f"  {name:16s} {summary(kernel):>32s} {summary(core):>32s}  {p:.3f}")
        kernel, core = (runs[runs["cc"] == cc]["srtt_p50_ms"].to_numpy() for cc in SENDERS)
        ci = stats.bootstrap((kernel, core), relative_difference, vectorized=False, method="percentile",
                             rng=1).confidence_interval
        print(f"  mean of srtt_p50_ms: kernel {kernel.mean():.2f}, core {core.mean():.2f} "
              f"({relative_difference(kernel, core):+.1%}; 95 % bootstrap interval {ci.low:+.1%} to {ci.high:+.1%})")
        rho = stats.spearmanr(runs["overestimated"], runs["queued"])
        print(f"  overestimated vs queued, all runs: Spearman rho {rho.statistic:.2f} (p {rho.pvalue:.2g})")


if __name__ == "__main__":
    main()
