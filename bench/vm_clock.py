"""How faithful is the emulated link, per VM clock and rate? Prints a table and the highest
faithful rate per clock and flow mix.

    .venv/bin/python bench/vm_clock.py [--clocks virtual:0,virtual:1,wall] [--rates 10,20,50,100]
                                       [--duration 15] [--out build/bench-vm-clock] [--reuse]

Per clock, one `cctest run --vm` of two scenarios over the rates: one CUBIC flow (40 ms, 2 BDP)
and 3 CUBIC + 3 BBR (20 ms, 2 BDP). Faithful: steady goodput (after 3 s, from the senders' ss
bytes_acked) >= 97 % of payload capacity and the smallest ping within 2 % of the configured RTT.
Also printed: the guest CPU's busy share while flows ran and host seconds per guest second of
the flows. The wall clock runs its VMs one at a time (-j 1): VMs in parallel would slow each
other's links. --reuse prints the table from an earlier --out without running anything.
"""

from __future__ import annotations

from fidelity import cctest_run, figures, run_dirs, vm_bench_parser


def experiments(rates: list[float], duration_s: float) -> dict:
    return {
        "defaults": {"duration_s": duration_s,
                     "capture": {"ss_interval_ms": 100, "qdisc_interval_ms": 100, "tcp_probe": False, "pcap": False}},
        "scenarios": {
            "one-flow": {"link": {"rate_mbps": rates[0], "rtt_ms": 40, "buffer_bdp": 2},
                         "flows": [{"cc": "cubic"}], "matrix": {"rate_mbps": rates}},
            "three-v-three": {"link": {"rate_mbps": rates[0], "rtt_ms": 20, "buffer_bdp": 2},
                              "flows": [{"cc": "cubic", "count": 3}, {"cc": "bbr", "count": 3}],
                              "matrix": {"rate_mbps": rates}},
        },
    }


def clock_args(clock: str) -> list[str]:
    kind, _, shift = clock.partition(":")
    if kind == "wall":
        return ["--clock", "wall", "-j", "1"]
    return ["--clock", "virtual", "--icount-shift", shift or "0"]


def main() -> None:
    parser = vm_bench_parser(__doc__, "build/bench-vm-clock")
    parser.add_argument("--clocks", default="virtual:0,virtual:1,wall")
    parser.add_argument("--rates", default="10,20,50,100")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    rows = []
    for clock in args.clocks.split(","):
        out = args.out / clock.replace(":", "-shift")
        wall = None
        if not args.reuse:
            wall = cctest_run(experiments(rates, args.duration), ["one-flow", "three-v-three"], out, clock_args(clock))
        for path in run_dirs(out):
            rows.append({**figures(path), "clock": clock})
        if wall is not None:
            print(f"{clock}: {len(run_dirs(out))} runs in {wall / 60:.1f} min wall")
    print(f"\n{'clock':<11} {'flows':>5} {'Mbit/s':>6} {'goodput':>8} {'min RTT':>8} {'CPU busy':>8} "
          f"{'wall/guest':>10}  faithful")
    for row in sorted(rows, key=lambda r: (r["clock"], r["flows"], r["rate_mbps"])):
        ratio = (row["flows_wall_s"] / row["flows_guest_s"]) if row["flows_wall_s"] else None
        print(f"{row['clock']:<11} {row['flows']:>5} {row['rate_mbps']:>6g} {row['steady_goodput']:>8.1%} "
              f"{row['rtt_err']:>+8.1%} {row['cpu_busy'] or 0:>8.1%} "
              f"{(f'{ratio:.1f}' if ratio else '-'):>10}  {'yes' if row['faithful'] else 'NO'}")
    print("\nhighest faithful rate (every rate up to it faithful):")
    for clock in args.clocks.split(","):
        for n in (1, 6):
            ok = sorted((r["rate_mbps"], r["faithful"]) for r in rows if r["clock"] == clock and r["flows"] == n)
            best = None
            for rate, faithful in ok:
                if not faithful:
                    break
                best = rate
            print(f"  {clock:<11} {n} flow(s): {f'{best:g} Mbit/s' if best else 'none'}")


if __name__ == "__main__":
    main()
