"""What each emulation engine costs, and whether the two agree. Prints tables.

    .venv/bin/python bench/engines.py cost [--engines qemu,uml] [--rates 20,50,100] [--flows 1,6]
                                           [--duration 20] [--out build/bench-engines] [--reuse]
    .venv/bin/python bench/engines.py equivalence [--engines qemu,uml] [-n 5] [--duration 20] ...

cost: per engine, one `cctest run --vm --engine E -j 1` of one CUBIC flow and of 3 CUBIC + 3 BBR
(20 ms, 2 BDP, ss and qdisc sampled every 100 ms, tcp_probe traced) at each rate. Prints host
seconds per guest second of the flows phase (host seconds: UML's host-stamped console log, QEMU's
meta.json vm.phases),
the steady goodput (after 3 s, from ss bytes_acked, % of payload capacity) and the host seconds of
boot + topology (the guest's boot, then the "build topology" phase).

equivalence: the physics scenarios (one CUBIC flow; CUBIC vs BBR in 0.5 and 5 BDP; bbr_cws vs
CUBIC), n repetitions each (seeds differ), on each engine; prints mean +- 95 % CI (Student t) per
figure side by side: total goodput, the first flow's share, Jain's index, retransmissions,
median srtt.

Both write their run directories under --out/<mode>/<engine>; --reuse prints from them without
running anything. Each engine runs on its own; the host may be loaded: results do not change with
load on either engine's virtual clock, only the cost figures do (say how loaded it was).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

from fidelity import cctest_run, figures, run_dirs

SAMPLING = {"ss_interval_ms": 100, "qdisc_interval_ms": 100, "tcp_probe": True, "pcap": False}


def cost_experiments(rates: list[float], flows: list[int], duration_s: float) -> tuple[dict, list[str]]:
    scenarios = {}
    if 1 in flows:
        scenarios["one-flow"] = {"link": {"rate_mbps": rates[0], "rtt_ms": 20, "buffer_bdp": 2},
                                 "flows": [{"cc": "cubic"}], "matrix": {"rate_mbps": rates}}
    if 6 in flows:
        scenarios["three-v-three"] = {"link": {"rate_mbps": rates[0], "rtt_ms": 20, "buffer_bdp": 2},
                                      "flows": [{"cc": "cubic", "count": 3}, {"cc": "bbr", "count": 3}],
                                      "matrix": {"rate_mbps": rates}}
    return {"defaults": {"duration_s": duration_s, "capture": SAMPLING}, "scenarios": scenarios}, list(scenarios)


def equivalence_experiments(duration_s: float, repetitions: int) -> tuple[dict, list[str]]:
    link = {"rate_mbps": 20, "rtt_ms": 20}
    scenarios = {
        "cubic-alone": {"link": {**link, "buffer_bdp": 2}, "flows": [{"cc": "cubic"}]},
        "cubic-vs-bbr-0.5bdp": {"link": {**link, "buffer_bdp": 0.5}, "flows": [{"cc": "cubic"}, {"cc": "bbr"}]},
        "cubic-vs-bbr-5bdp": {"link": {**link, "buffer_bdp": 5}, "flows": [{"cc": "cubic"}, {"cc": "bbr"}]},
        "bbr_cws-vs-cubic": {"link": {**link, "buffer_bdp": 1}, "flows": [{"cc": "bbr_cws"}, {"cc": "cubic"}]},
    }
    return {"defaults": {"duration_s": duration_s, "repetitions": repetitions, "capture": SAMPLING},
            "scenarios": scenarios}, list(scenarios)


def host_seconds(paths: list[Path], where: Path) -> dict[Path, dict]:
    """Per run: host seconds of its flows phase, and (first run of its guest) from boot to the end
    of its topology. UML: from the host-stamped console log (the guest reads the host's clock
    through hostfs only to the second); QEMU: from meta.json's vm phases (9p gives nanoseconds)."""
    from cctest.emulation.uml import console_phases

    out: dict[Path, dict] = {}
    metas = {path: json.loads((path / "meta.json").read_text()) for path in paths}
    log = where / ".vm-0.log"
    stamped = console_phases(log.read_text(errors="replace")) if log.exists() else []
    ordered = sorted(paths, key=lambda p: metas[p]["start_time"])
    if stamped and len(stamped) == len(ordered):
        for k, (path, phases) in enumerate(zip(ordered, stamped, strict=False)):
            names = list(phases)
            flows = phases["teardown"] - phases["flows"] if {"flows", "teardown"} <= set(phases) else None
            after_topology = names[names.index("build topology") + 1] if "build topology" in names[:-1] else None
            out[path] = {"flows_wall_s": flows,
                         "boot_topology_s": phases[after_topology] if k == 0 and after_topology else None}
        return out
    for k, path in enumerate(ordered):
        vm = metas[path].get("vm") or {}
        phases = vm.get("phases", {})
        boot = (vm.get("boot") or {}).get("wall_s")
        before = [p.get("wall_s") for name, p in phases.items()
                  if name in ("load modules", "start tracing", "build topology")]
        ready = boot + sum(before) if k == 0 and boot is not None and before and None not in before else None
        out[path] = {"flows_wall_s": phases.get("flows", {}).get("wall_s"), "boot_topology_s": ready}
    return out


def run_engine(mode: str, engine: str, experiments: dict, scenarios: list[str], out: Path, reuse: bool) -> list[Path]:
    where = out / mode / engine
    if not reuse:
        wall = cctest_run(experiments, scenarios, where, ["--engine", engine, "-j", "1", "--force"])
        print(f"{engine}: {len(run_dirs(where))} runs in {wall / 60:.1f} min wall (load average then "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    return run_dirs(where)


def cost(args) -> None:
    rates = [float(r) for r in args.rates.split(",")]
    flows = [int(n) for n in args.flows.split(",")]
    experiments, scenarios = cost_experiments(rates, flows, args.duration)
    rows = []
    for engine in args.engines.split(","):
        paths = run_engine("cost", engine, experiments, scenarios, args.out, args.reuse)
        timing = host_seconds(paths, args.out / "cost" / engine)
        for path in paths:
            row = figures(path)
            row.update(engine=engine, **timing[path])
            rows.append(row)
    print(f"\n{'engine':<6} {'flows':>5} {'Mbit/s':>6} {'host s/guest s':>14} {'goodput':>8} "
          f"{'boot+topology host s':>20}")
    for row in sorted(rows, key=lambda r: (r["flows"], r["rate_mbps"], r["engine"])):
        ratio = row["flows_wall_s"] / row["flows_guest_s"] if row["flows_wall_s"] else None
        boot = row["boot_topology_s"]
        print(f"{row['engine']:<6} {row['flows']:>5} {row['rate_mbps']:>6g} {(f'{ratio:.2f}' if ratio else '-'):>14} "
              f"{row['steady_goodput']:>8.1%} {(f'{boot:.1f}' if boot is not None else '-'):>20}")
    print("boot+topology: host seconds from starting the guest to its first run's topology being up "
          "(one per guest: later runs reuse or reshape it)")


def ci95(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % confidence interval (Student t)."""
    from scipy import stats

    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def equivalence_figures(path: Path) -> dict:
    row = figures(path)
    ss = pd.read_parquet(path / "ss.parquet")
    flows = pd.read_parquet(path / "flows.parquet")
    received = flows.sort_values("flow")["bytes_received"].astype(float)
    return {"scenario": row["scenario"], "total Mbit/s": sum(row["goodput_mbps"]),
            "flow 0 share": received.iloc[0] / received.sum(), "Jain": row["jain"],
            "retransmits": sum(row["retransmits"]), "median srtt ms": float(ss["srtt_ms"].median())}


def equivalence(args) -> None:
    experiments, scenarios = equivalence_experiments(args.duration, args.n)
    results: dict[tuple[str, str], list[dict]] = {}
    engines = args.engines.split(",")
    for engine in engines:
        for path in run_engine("equivalence", engine, experiments, scenarios, args.out, args.reuse):
            row = equivalence_figures(path)
            results.setdefault((row["scenario"], engine), []).append(row)
    names = ["total Mbit/s", "flow 0 share", "Jain", "retransmits", "median srtt ms"]
    print("\nmean +- 95 % CI over the repetitions (n per cell in brackets)")
    print(f"{'scenario':<22} {'figure':<15} " + " ".join(f"{e:>22}" for e in engines))
    for scenario in scenarios:
        for name in names:
            cells = []
            for engine in engines:
                values = [r[name] for r in results.get((scenario, engine), []) if not math.isnan(r[name])]
                if not values:
                    cells.append("-")
                    continue
                mean, half = ci95(values)
                cells.append(f"{mean:.3g} +- {half:.2g} [{len(values)}]")
            print(f"{scenario:<22} {name:<15} " + " ".join(f"{c:>22}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["cost", "equivalence"])
    parser.add_argument("--engines", default="qemu,uml")
    parser.add_argument("--rates", default="20,50,100")
    parser.add_argument("--flows", default="1,6")
    parser.add_argument("-n", type=int, default=5, help="equivalence: repetitions per scenario and engine")
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--out", type=Path, default=Path("build/bench-engines"))
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    print(f"bench/engines.py {' '.join(sys.argv[1:])}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs)")
    (cost if args.mode == "cost" else equivalence)(args)


if __name__ == "__main__":
    main()
