"""How long `cctest --help` (and `cctest run --help`) take, and which heavy libraries they import.

    python bench/cli_help.py [--repeat N]

Runs the installed entry point beside this interpreter (the venv's `cctest`) N times per command
and prints the median and best wall time, then lists pandas, numpy, plotly, pydantic or rich if
`import cctest.cli.main` pulled them in. Target: under 0.3 s with none of them imported (the CLI
imports them inside the commands that need them). Measured 2026-11-24 on the 2-core dev machine
shared with five other jobs (10 runs each): `cctest --help` median 0.14 s, `run --help` 0.09 s,
`report --help` 0.21 s, none of them imported; before the lazy imports `cctest --help` took 1.0 s.
On a host at load average 20 the interpreter alone takes 0.2-0.5 s: the line over the interpreter
says what cctest adds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("pandas", "numpy", "plotly", "pydantic", "rich", "pyarrow")
TARGET_S = 0.3


def timed(cmd: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return times


def heavy_imports() -> list[str]:
    code = ("import sys, cctest.cli.main; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    cctest = str(Path(sys.executable).with_name("cctest"))
    bare = statistics.median(timed([sys.executable, "-c", "pass"], args.repeat))
    print(f"{'python -c pass':22s} median {bare:.3f} s (the interpreter alone: how loaded this host is)")
    worst = 0.0
    for cmd in ([cctest, "--help"], [cctest, "run", "--help"], [cctest, "report", "--help"]):
        times = timed(cmd, args.repeat)
        worst = max(worst, statistics.median(times))
        print(f"{' '.join(['cctest', *cmd[1:]]):22s} median {statistics.median(times):.3f} s, "
              f"best {min(times):.3f} s, {statistics.median(times) - bare:+.3f} s over the interpreter "
              f"({args.repeat} runs)")
    heavy = heavy_imports()
    print(f"heavy modules imported by cctest.cli.main: {', '.join(heavy) or 'none'}")
    ok = worst < TARGET_S and not heavy
    print(f"target: median under {TARGET_S} s, no heavy import: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
