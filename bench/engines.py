"""What each emulation engine costs, and whether they agree. Prints tables.

    .venv/bin/python bench/engines.py cost [--engines qemu,uml] [--rates 20,50,100] [--flows 1,6]
                                           [--duration 20] [--out build/bench-engines] [--reuse]
                                           [--page docs/bench.md]
    .venv/bin/python bench/engines.py equivalence [--engines qemu,uml] [-n 5] [--duration 20] ...
    .venv/bin/python bench/engines.py captures [--engines uml] [--rates 100] [--flows 1,6] [--duration 60] [-n 3] ...

An engine is `qemu`, `uml` (the UML kernel series and userspace mode this environment selects,
$CCTEST_UML_SERIES and $CCTEST_UML_USERSPACE), or a UML kernel by name: `uml-6.1`, `uml-7.2` (guest
processes under seccomp) or `uml-7.2-ptrace`, so that one invocation compares kernels and modes;
each named kernel must be built (scripts/uml-kernel.sh), and every run's meta.json must say it ran
on the kernel and mode its name asks for.

cost: per engine, one `cctest run --vm --engine E -j 1` of one CUBIC flow and of 3 CUBIC + 3 BBR
(20 ms, 2 BDP, ss and qdisc sampled every 100 ms, tcp_probe traced) at each rate. Prints host
seconds per guest second of the flows phase (host seconds: UML's host-stamped console log, QEMU's
meta.json vm.phases), the ratio to the first engine's on the same row,
the steady goodput (after 3 s, from ss bytes_acked, % of payload capacity) and the host seconds of
boot + topology (the guest's boot, then the "build topology" phase: every run's on UML, which boots a
guest per run; a guest's first run's on QEMU). --page adds that table to a generated page that keeps
the earlier runs' rows, with each engine's date, commit, host CPUs and load (bench/cost_page.py).

equivalence: the physics scenarios (one CUBIC flow; CUBIC vs BBR in 0.5 and 5 BDP; bbr_cws vs
CUBIC), n repetitions each (seeds differ), on each engine; prints mean +- 95 % CI (Student t) per
figure side by side: total goodput, the first flow's share, Jain's index, retransmissions,
median srtt; and whether the engines' intervals overlap (docs/uml.md's test of equivalence: within
run-to-run spread when they do).

captures: what each capture costs. The cost mode's runs (at the first rate) with every capture on,
and without ss sampling, without qdisc sampling, without tcp_probe, and with none of them, n seeds
each (-n); prints host seconds per guest second of the flows phase for each (mean +- 95 % CI), and
each capture's price: what taking it away saves, per guest second and as a part of the whole. A
capture changes a seed's draw (its guest processes and their random draws move the order of events
at an instant), and a draw's own cost varies by a third with six flows: one seed a set measures the
draw, not the capture (docs/measurements.md, "What the captures cost").

All three write their run directories under --out/<mode>/<engine>; --reuse prints from them without
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

import cost_page
from fidelity import cctest_run, figures, run_dirs

SAMPLING = {"ss_interval_ms": 100, "qdisc_interval_ms": 100, "tcp_probe": True, "pcap": False}
# UML kernels by name: the environment `cctest run` gets (None: unset), scripts/uml-kernel.sh's series
UML_VARIANTS: dict[str, dict[str, str | None]] = {
    "uml-6.1": {"CCTEST_UML_SERIES": "6.1", "CCTEST_UML_USERSPACE": None},
    "uml-7.2": {"CCTEST_UML_SERIES": "7.2", "CCTEST_UML_USERSPACE": "seccomp"},
    "uml-7.2-ptrace": {"CCTEST_UML_SERIES": "7.2", "CCTEST_UML_USERSPACE": "ptrace"},
}


def engine_of(label: str) -> tuple[str, dict[str, str | None]]:
    """The --engine and the environment for an engine as this benchmark names it."""
    if label in UML_VARIANTS:
        return "uml", UML_VARIANTS[label]
    return label, {}


def ran_on(path: Path) -> str:
    """What a run's meta.json says it ran on, in the names above (uml-<series>[-ptrace], or the
    engine's name)."""
    engine = json.loads((path / "meta.json").read_text()).get("engine") or {}
    if engine.get("name") != "uml":
        return str(engine.get("name", "unknown"))
    series = str(engine.get("kernel", {}).get("source", "?")).split()[0].removeprefix("linux-source-")
    # 6.1 records no mode: ptrace, its only one; 7.2's default is seccomp
    return f"uml-{series}" + ("-ptrace" if series != "6.1" and engine.get("userspace") == "ptrace" else "")


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


# Each capture taken away in turn. ss and qdisc sampling cannot be switched off; an interval longer
# than the run (the schema's longest) leaves a sample or two, which is what "off" costs.
CAPTURE_SETS: dict[str, dict] = {
    "all": SAMPLING,
    "no ss": {**SAMPLING, "ss_interval_ms": 10_000},
    "no qdisc": {**SAMPLING, "qdisc_interval_ms": 10_000},
    "no tcp_probe": {**SAMPLING, "tcp_probe": False},
    "none": {**SAMPLING, "ss_interval_ms": 10_000, "qdisc_interval_ms": 10_000, "tcp_probe": False},
}


def captures_experiments(rate: float, flows: list[int], duration_s: float,
                         repetitions: int) -> tuple[dict, dict[str, str]]:
    """The cost scenarios at one rate, one copy per capture set; also each scenario's capture set."""
    shapes = {1: [{"cc": "cubic"}], 6: [{"cc": "cubic", "count": 3}, {"cc": "bbr", "count": 3}]}
    scenarios, sets = {}, {}
    for count in flows:
        for label, capture in CAPTURE_SETS.items():
            name = f"{count}-flows-{label.replace(' ', '-')}"
            scenarios[name] = {"link": {"rate_mbps": rate, "rtt_ms": 20, "buffer_bdp": 2},
                               "flows": shapes[count], "capture": capture}
            sets[name] = label
    return {"defaults": {"duration_s": duration_s, "repetitions": repetitions}, "scenarios": scenarios}, sets


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


def stamped_seconds(phases: dict[str, float], first: bool) -> dict:
    """A run's host seconds from its phases' stamps in a console log (host seconds since boot)."""
    names = list(phases)
    flows = phases["teardown"] - phases["flows"] if {"flows", "teardown"} <= set(phases) else None
    after_topology = names[names.index("build topology") + 1] if "build topology" in names[:-1] else None
    return {"flows_wall_s": flows, "boot_topology_s": phases[after_topology] if first and after_topology else None}


def host_seconds(paths: list[Path], where: Path) -> dict[Path, dict]:
    """Per run: host seconds of its flows phase, and (first run of its guest) from boot to the end
    of its topology. UML: from the host-stamped console log (the guest reads the host's clock
    through hostfs only to the second), the run's own copy where its guest made that run alone (a
    UML guest per run), else the session's; QEMU: from meta.json's vm phases (9p gives nanoseconds)."""
    from cctest.emulation.uml import console_phases
    from cctest.run.session import GUEST_CONSOLE

    out: dict[Path, dict] = {}
    metas = {path: json.loads((path / "meta.json").read_text()) for path in paths}
    log = where / ".vm-0.log"
    stamped = console_phases(log.read_text(errors="replace")) if log.exists() else []
    ordered = sorted(paths, key=lambda p: metas[p]["start_time"])
    own = {path: console_phases((path / GUEST_CONSOLE).read_text(errors="replace"))
           for path in ordered if (path / GUEST_CONSOLE).exists()}
    if ordered and all(len(own.get(path, [])) == 1 for path in ordered):
        return {path: stamped_seconds(own[path][0], first=True) for path in ordered}
    if stamped and len(stamped) == len(ordered):
        return {path: stamped_seconds(phases, first=k == 0)
                for k, (path, phases) in enumerate(zip(ordered, stamped, strict=True))}
    for k, path in enumerate(ordered):
        vm = metas[path].get("vm") or {}
        phases = vm.get("phases", {})
        boot = (vm.get("boot") or {}).get("wall_s")
        before = [p.get("wall_s") for name, p in phases.items()
                  if name in ("load modules", "start tracing", "build topology")]
        ready = boot + sum(before) if k == 0 and boot is not None and before and None not in before else None
        out[path] = {"flows_wall_s": phases.get("flows", {}).get("wall_s"), "boot_topology_s": ready}
    return out


def run_engine(mode: str, label: str, experiments: dict, scenarios: list[str], out: Path, reuse: bool) -> list[Path]:
    where = out / mode / label
    engine, env = engine_of(label)
    if not reuse:
        host = cost_page.host_now()
        wall = cctest_run(experiments, scenarios, where, ["--engine", engine, "-j", "1", "--force"], env=env)
        cost_page.save_host_record(where, host)  # the load and CPUs the page's row states
        print(f"{label}: {len(run_dirs(where))} runs in {wall / 60:.1f} min wall (load average then "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    paths = run_dirs(where)
    wrong = sorted({ran_on(path) for path in paths} - {label}) if label in UML_VARIANTS else []
    if wrong:
        raise SystemExit(f"{where}: runs asked for {label} ran on {', '.join(wrong)}")
    return paths


def cost_rows(args: argparse.Namespace, engines: list[str]) -> tuple[list[dict], dict[str, cost_page.RunContext]]:
    """Every engine's runs (made first unless --reuse) as the table's rows, and each engine's context."""
    rates = [float(r) for r in args.rates.split(",")]
    flows = [int(n) for n in args.flows.split(",")]
    experiments, scenarios = cost_experiments(rates, flows, args.duration)
    rows, contexts = [], {}
    for engine in engines:
        where = args.out / "cost" / engine
        paths = run_engine("cost", engine, experiments, scenarios, args.out, args.reuse)
        timing = host_seconds(paths, where)
        for path in paths:
            row = figures(path)
            row.update(engine=engine, **timing[path])
            ratio = row["flows_wall_s"] / row["flows_guest_s"] if row["flows_wall_s"] else None
            rows.append({**row, "ratio": ratio})
        if paths:
            contexts[engine] = cost_page.context_of(where, (json.loads((p / "meta.json").read_text()) for p in paths))
    return rows, contexts


def add_against(rows: list[dict], base: str) -> list[dict]:
    """Each row's ratio over the base engine's at the same flows and rate (None where either is
    missing)."""
    first = {(r["flows"], r["rate_mbps"]): r["ratio"] for r in rows if r["engine"] == base}
    for row in rows:
        reference = first.get((row["flows"], row["rate_mbps"]))
        row["against"] = row["ratio"] / reference if row["ratio"] and reference else None
    return rows


def print_cost_table(rows: list[dict], engines: list[str]) -> None:
    width = max(len(e) for e in ["engine", *engines])
    print(f"\n{'engine':<{width}} {'flows':>5} {'Mbit/s':>6} {'host s/guest s':>14} {'x ' + engines[0]:>{width + 2}} "
          f"{'goodput':>8} {'boot+topology host s':>20}")
    for row in rows:
        ratio, boot, against = row["ratio"], row["boot_topology_s"], row["against"]
        print(f"{row['engine']:<{width}} {row['flows']:>5} {row['rate_mbps']:>6g} "
              f"{(f'{ratio:.2f}' if ratio else '-'):>14} {(f'{against:.2f}' if against else '-'):>{width + 2}} "
              f"{row['steady_goodput']:>8.1%} {(f'{boot:.1f}' if boot is not None else '-'):>20}")
    print("boot+topology: host seconds from starting the guest to its first run's topology being up "
          "(UML: every run's, each boots its own guest; QEMU: one per guest, later runs reuse or reshape it)")
    boots = {e: [r["boot_topology_s"] for r in rows if r["engine"] == e and r["boot_topology_s"] is not None]
             for e in engines}
    print("boot+topology, median over the runs: " + ", ".join(
        f"{e} {statistics.median(b):.1f} s [{len(b)}]" for e, b in boots.items() if b))


def cost(args: argparse.Namespace) -> None:
    engines = args.engines.split(",")
    rows, contexts = cost_rows(args, engines)
    order = {engine: k for k, engine in enumerate(engines)}
    rows = sorted(add_against(rows, engines[0]), key=lambda r: (r["flows"], r["rate_mbps"], order[r["engine"]]))
    print_cost_table(rows, engines)
    if args.page:
        page_rows = [cost_page.page_row(contexts[row["engine"]], row, engines[0]) for row in rows]
        cost_page.write_page(args.page, page_rows, page_name(args.page))
        print(f"{args.page}: {len(page_rows)} rows written")


def captures(args: argparse.Namespace) -> None:
    rate = float(args.rates.split(",")[0])
    flows = [int(n) for n in args.flows.split(",")]
    if not set(flows) <= {1, 6}:
        raise cost_page.BadInput(f"--flows {args.flows}: the captures mode runs 1 and/or 6 flows")
    experiments, sets = captures_experiments(rate, flows, args.duration, args.n)
    print(f"\n{rate:g} Mbit/s, {args.duration:g} s a run, {args.n} seed(s) a set; host s per guest s of the flows "
          "phase, mean +- 95 % CI [n]; a capture's price: what the runs without it save on the mean, per guest "
          "second and as a part of the 'all' runs'")
    print(f"{'engine':<16} {'flows':>5} {'captures':<13} {'host s/guest s':>22} {'saves':>8} {'part':>6}")
    for engine in args.engines.split(","):
        where = args.out / "captures" / engine
        paths = run_engine("captures", engine, experiments, list(sets), args.out, args.reuse)
        timing = host_seconds(paths, where)
        ratios: dict[tuple[int, str], list[float]] = {}
        for path in paths:
            row = figures(path)
            wall_s = timing[path]["flows_wall_s"]
            if wall_s and row["flows_guest_s"]:
                ratios.setdefault((row["flows"], sets[row["scenario"]]), []).append(wall_s / row["flows_guest_s"])
        for count in flows:
            whole = statistics.fmean(ratios[(count, "all")]) if ratios.get((count, "all")) else None
            for label in CAPTURE_SETS:
                values = ratios.get((count, label), [])
                mean, half = ci95(values) if values else (None, math.nan)
                saves = whole - mean if whole and mean and label != "all" else None
                cell = f"{mean:.3f} +- {half:.3f} [{len(values)}]" if mean else "-"
                print(f"{engine:<16} {count:>5} {label:<13} {cell:>22} "
                      f"{(f'{saves:+.3f}' if saves is not None else '-'):>8} "
                      f"{(f'{saves / whole:.0%}' if saves is not None and whole else '-'):>6}")


def page_name(page: Path) -> str:
    """How the page names itself in the command its marker gives: from the checkout's root."""
    try:
        return str(page.resolve().relative_to(cost_page.REPO))
    except ValueError:
        return str(page)


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


def overlap(intervals: list[tuple[float, float]]) -> str:
    """Whether mean +- half-width intervals share a point ("overlap"), or not ("apart"); "-" with
    fewer than two engines or an interval of one run."""
    if len(intervals) < 2 or any(math.isnan(half) for _, half in intervals):
        return "-"
    return "overlap" if max(m - h for m, h in intervals) <= min(m + h for m, h in intervals) else "apart"


def equivalence(args) -> None:
    experiments, scenarios = equivalence_experiments(args.duration, args.n)
    results: dict[tuple[str, str], list[dict]] = {}
    engines = args.engines.split(",")
    for engine in engines:
        for path in run_engine("equivalence", engine, experiments, scenarios, args.out, args.reuse):
            row = equivalence_figures(path)
            results.setdefault((row["scenario"], engine), []).append(row)
    names = ["total Mbit/s", "flow 0 share", "Jain", "retransmits", "median srtt ms"]
    print("\nmean +- 95 % CI over the repetitions (n per cell in brackets); intervals: whether they overlap")
    print(f"{'scenario':<22} {'figure':<15} " + " ".join(f"{e:>22}" for e in engines) + f" {'intervals':>10}")
    apart = []
    for scenario in scenarios:
        for name in names:
            cells, intervals = [], []
            for engine in engines:
                values = [r[name] for r in results.get((scenario, engine), []) if not math.isnan(r[name])]
                if not values:
                    cells.append("-")
                    continue
                mean, half = ci95(values)
                intervals.append((mean, half))
                cells.append(f"{mean:.3g} +- {half:.2g} [{len(values)}]")
            said = overlap(intervals) if len(intervals) == len(engines) else "-"
            if said == "apart":
                apart.append(f"{scenario} {name}")
            print(f"{scenario:<22} {name:<15} " + " ".join(f"{c:>22}" for c in cells) + f" {said:>10}")
    listed = f" ({'; '.join(apart)})" if apart else ""
    print(f"intervals apart: {len(apart)} of {len(scenarios) * len(names)}{listed}")


def check_page_option(args: argparse.Namespace) -> None:
    """--page is refused before anything runs, not after an hour of runs."""
    if args.page is None:
        return
    if args.mode != "cost":
        raise cost_page.BadInput("--page: only the cost mode writes a page")
    cost_page.check_page(args.page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["cost", "equivalence", "captures"])
    parser.add_argument("--engines", default="qemu,uml",
                        help=f"comma-separated: qemu, uml, {', '.join(UML_VARIANTS)}")
    parser.add_argument("--rates", default="20,50,100")
    parser.add_argument("--flows", default="1,6")
    parser.add_argument("-n", type=int, default=5,
                        help="equivalence: repetitions per scenario and engine; captures: seeds per capture set")
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--out", type=Path, default=Path("build/bench-engines"))
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--page", type=Path,
                        help="cost: add this run's table to this generated page (docs/bench.md), keeping earlier rows")
    args = parser.parse_args()
    try:
        check_page_option(args)
        print(f"bench/engines.py {' '.join(sys.argv[1:])}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"{os.cpu_count()} CPUs)")
        {"cost": cost, "equivalence": equivalence, "captures": captures}[args.mode](args)
    except cost_page.BadInput as err:
        print(f"bench/engines.py: {err}", file=sys.stderr)  # one line, and cctest's code for bad input
        sys.exit(err.exit_code)


if __name__ == "__main__":
    main()
