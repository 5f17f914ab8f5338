"""VMs in parallel and run-to-run spread on the virtual clock.

    .venv/bin/python bench/vm_parallel.py [--jobs 1,2] [--runs 8] [--duration 15]
                                          [--out build/bench-vm-parallel] [--reuse]

One sweep of --runs repetitions of CUBIC vs BBR (20 Mbit/s, 20 ms, 0.5 BDP), run once per -j
value. Prints each sweep's wall time and the speedup over the first, then per -j value the mean,
standard deviation and range over the repetitions of per-flow goodput, Jain's index, BBR's share
and retransmissions, and whether the -j means agree within the spread (two standard deviations
of the first), and for how many seeds each -j value's run gave the first's outcome exactly (the
same per-flow goodput, retransmissions and shares: on UML's seeded clock a run should not depend on
what ran beside it). Seeds are recorded per repetition (meta.json `seed`). --reuse prints from an
earlier --out without running anything (wall times are then those recorded in timing.txt).
"""

from __future__ import annotations

import statistics

from fidelity import cctest_run, figures, run_dirs, vm_bench_parser

SCENARIO = "cubic-vs-bbr-shallow"


def experiments(runs: int, duration_s: float) -> dict:
    return {"scenarios": {SCENARIO: {
        "link": {"rate_mbps": 20, "rtt_ms": 20, "buffer_bdp": 0.5},
        "flows": [{"cc": "cubic"}, {"cc": "bbr"}],
        "duration_s": duration_s, "repetitions": runs, "seed": 1,
        "capture": {"ss_interval_ms": 100, "qdisc_interval_ms": 100, "tcp_probe": False, "pcap": False},
    }}}


def spread(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):8.3f} ± {sd:6.3f}  [{min(values):.3f}, {max(values):.3f}]"


def metrics(rows: list[dict]) -> dict[str, list[float]]:
    return {
        "CUBIC goodput (Mbit/s)": [r["goodput_mbps"][0] for r in rows],
        "BBR goodput (Mbit/s)": [r["goodput_mbps"][1] for r in rows],
        "BBR share": [r["shares"]["bbr"] for r in rows],
        "Jain's index": [r["jain"] for r in rows],
        "CUBIC retransmits": [float(r["retransmits"][0]) for r in rows],
        "BBR retransmits": [float(r["retransmits"][1]) for r in rows],
    }


OUTCOME = ("goodput_mbps", "retransmits", "shares", "jain")


def same_outcome_per_seed(base: list[dict], other: list[dict]) -> tuple[int, int]:
    """How many of `base`'s seeds `other` ran with exactly the same outcome, and how many it ran."""
    theirs = {r["seed"]: r for r in other}
    common = [r for r in base if r["seed"] in theirs]
    same = sum(all(r[k] == theirs[r["seed"]][k] for k in OUTCOME) for r in common)
    return same, len(common)


def main() -> None:
    parser = vm_bench_parser(__doc__, "build/bench-vm-parallel")
    parser.add_argument("--jobs", default="1,2")
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    jobs = [int(j) for j in args.jobs.split(",")]
    walls, by_jobs = {}, {}
    for j in jobs:
        out = args.out / f"j{j}"
        timing = out / "timing.txt"
        if not args.reuse:
            walls[j] = cctest_run(experiments(args.runs, args.duration), [SCENARIO], out, ["-j", str(j)])
            timing.write_text(f"{walls[j]:.1f}\n")
        elif timing.exists():
            walls[j] = float(timing.read_text())
        by_jobs[j] = [figures(path) for path in run_dirs(out)]
    base = jobs[0]
    print(f"{args.runs} runs of {args.duration:g} s flows:")
    for j in jobs:
        speedup = walls[base] / walls[j] if j in walls and base in walls else float("nan")
        print(f"  -j {j}: {walls.get(j, float('nan')) / 60:5.1f} min wall, speedup {speedup:.2f}x over -j {base}")
    print("  seeds:", ", ".join(str(r["seed"]) for r in by_jobs[base]))
    for j in jobs[1:]:
        same, common = same_outcome_per_seed(by_jobs[base], by_jobs[j])
        print(f"  -j {j}: the same outcome as -j {base} for {same} of {common} seeds")
    for name in metrics(by_jobs[base]):
        print(f"\n{name}")
        first = metrics(by_jobs[base])[name]
        sd = statistics.stdev(first) if len(first) > 1 else 0.0
        for j in jobs:
            values = metrics(by_jobs[j])[name]
            agree = abs(statistics.mean(values) - statistics.mean(first)) <= 2 * sd
            print(f"  -j {j}: {spread(values)}" + ("" if j == base else f"  {'agrees' if agree else 'DIFFERS'}"))


if __name__ == "__main__":
    main()
