"""Does a UML run repeat exactly? The same scenario and seed twice, then another seed, compared
table by table. Prints, per scenario, each run's per-flow bytes and retransmissions and, per pair,
which tables are identical and where the first difference is.

    taskset -c 1 .venv/bin/python bench/uml_determinism.py [--duration 10] [--out build/bench-determinism]
                                                           [--engine uml] [--reuse]

Scenarios: one CUBIC flow, and 3 CUBIC + 3 BBR (20 Mbit/s, 20 ms, 2 BDP, ss and qdisc sampled every
100 ms, tcp_probe traced). Every run goes into the same, empty --out (<out>/<scenario>/run), which
is then renamed to <out>/<scenario>/seed<n>-<copy>: the kernel mixes its command line, which names
--out, into its random number generator, and what the guest finds there changes how many of its
system calls fail, each of which costs guest time (docs/uml.md, "Determinism"). --engine: `uml`
(the kernel this environment selects) or a UML kernel by name, as bench/engines.py names them
(uml-6.1, uml-7.2, uml-7.2-ptrace). --reuse compares the run directories already there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from engines import SAMPLING, UML_VARIANTS, engine_of, ran_on
from fidelity import cctest_run, run_dirs

TABLES = ("flows", "ss", "tcp_probe", "qdisc", "throughput", "ping")
# Per-run labels, not outcomes.
IGNORED = {"run_id"}
SCENARIOS = {
    "one": [{"cc": "cubic"}],
    "six": [{"cc": "cubic", "count": 3}, {"cc": "bbr", "count": 3}],
}
RUNS = ((1, "a"), (1, "b"), (2, "a"))  # (seed, which copy)


def experiments(seed: int, duration_s: float) -> dict:
    return {"defaults": {"link": {"rate_mbps": 20, "rtt_ms": 20, "buffer_bdp": 2}, "duration_s": duration_s,
                         "capture": SAMPLING, "seed": seed},
            "scenarios": {name: {"flows": flows} for name, flows in SCENARIOS.items()}}


def table(path: Path, name: str) -> pd.DataFrame:
    frame = pd.read_parquet(path / f"{name}.parquet")
    return frame.drop(columns=[c for c in frame.columns if c in IGNORED]).reset_index(drop=True)


def first_difference(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """'identical', or where two tables first part (row count, or the first differing row's t_s)."""
    if a.shape == b.shape and a.equals(b):
        return "identical"
    rows = min(len(a), len(b))
    for i in range(rows):
        if not a.iloc[i].equals(b.iloc[i]):
            at = f" t_s {a.iloc[i]['t_s']:.3f}" if "t_s" in a.columns else ""
            columns = [c for c in a.columns if not _same(a.iloc[i][c], b.iloc[i][c])]
            return f"differs from row {i}{at} of {len(a)}/{len(b)} in {','.join(columns)}"
    return f"same first {rows} rows, {len(a)} vs {len(b)} rows"


def _same(x, y) -> bool:
    return bool(x == y or (pd.isna(x) and pd.isna(y)))


def flow_figures(path: Path) -> str:
    flows = pd.read_parquet(path / "flows.parquet").sort_values("flow")
    return " ".join(f"{row.cc}:{row.bytes_received}/{row.retransmits}" for row in flows.itertuples())


def compare(runs: dict[tuple[int, str], Path]) -> None:
    for key, path in runs.items():
        meta = json.loads((path / "meta.json").read_text())
        print(f"  seed {key[0]} {key[1]}: {ran_on(path)}, rng_seed {meta['engine'].get('rng_seed')}; "
              f"bytes received/retransmits per flow: {flow_figures(path)}")
    for left, right in (((1, "a"), (1, "b")), ((1, "a"), (2, "a"))):
        if left in runs and right in runs:
            found = {name: first_difference(table(runs[left], name), table(runs[right], name)) for name in TABLES}
            said = "; ".join(f"{name} {what}" for name, what in found.items())
            print(f"  seed {left[0]}{left[1]} vs seed {right[0]}{right[1]}: {said}")
            if right == (1, "b"):
                same = sum(what == "identical" for what in found.values())
                print(f"  same seed twice: {same} of {len(TABLES)} tables identical"
                      + (" (repeats exactly)" if same == len(TABLES) else " (does NOT repeat)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("build/bench-determinism"))
    parser.add_argument("--engine", default="uml", choices=["uml", *UML_VARIANTS])
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    out = args.out.resolve()
    engine, env = engine_of(args.engine)
    for name in SCENARIOS:
        runs = {}
        for seed, copy in RUNS:
            kept = out / name / f"seed{seed}-{copy}"
            if not args.reuse:
                if kept.exists():
                    raise SystemExit(f"{kept} exists: remove {out}, or --reuse")
                where = out / name / "run"
                cctest_run(experiments(seed, args.duration), [name], where, ["--engine", engine, "-j", "1"], env=env)
                where.rename(kept)
            dirs = run_dirs(kept)
            if dirs and args.engine in UML_VARIANTS and ran_on(dirs[0]) != args.engine:
                raise SystemExit(f"{dirs[0]}: asked for {args.engine}, ran on {ran_on(dirs[0])}")
            if dirs:
                runs[(seed, copy)] = dirs[0]
        print(f"{name}:")
        compare(runs)


if __name__ == "__main__":
    main()
