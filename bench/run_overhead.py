"""Where a session's wall time goes: per-phase seconds from the meta.json of real run directories.

    python bench/run_overhead.py DIR [DIR ...]

DIR is any directory holding run directories (e.g. build/vm-tests/<stamp>, reports/demo). Prints,
per phase, the runs that had it, its mean and total seconds, and the share of all run time that
was not spent carrying flows, split by whether the run built its topology or reused one.

Target: a reused-topology run spends under half its time outside its flows. Not met reliably
(49-57 % in three VM suites of 2026-11-22): reused runs wait 12-18 s on average for bpftrace to
attach (longer when a module's tracepoint is in its script), and a reshape (1-2 s) no longer
hides it.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def metas(dirs: list[Path]) -> list[dict]:
    found = []
    for root in dirs:
        for path in sorted(root.rglob("meta.json")):
            meta = json.loads(path.read_text())
            if meta.get("phase_s"):
                found.append(meta)
    return found


def summarise(found: list[dict]) -> None:
    for kind in ("built", "reused"):
        group = [m for m in found if m.get("topology", "built").startswith(kind)]
        if not group:
            continue
        per_phase: dict[str, list[float]] = defaultdict(list)
        for meta in group:
            for phase, seconds in meta["phase_s"].items():
                per_phase[phase].append(seconds)
        total = sum(sum(v) for v in per_phase.values())
        flows = sum(per_phase.get("flows", []))
        print(f"{kind} topology: {len(group)} runs, {total:.0f} s, {1 - flows / total:.0%} of it outside the flows")
        for phase, values in sorted(per_phase.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {phase:28s} runs {len(values):3d}  mean {sum(values) / len(values):6.2f} s  "
                  f"total {sum(values):7.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    found = metas(parser.parse_args().dirs)
    if not found:
        raise SystemExit("no meta.json with phase timings under the given directories")
    summarise(found)


if __name__ == "__main__":
    main()
