"""Benchmark `cctest report` on a long run: time to write the report and the HTML size.

    python bench/report.py [RUN_DIR] [--keep DIR] [--repeat N]

Without RUN_DIR it synthesises the paper-sized case (000 Table 2): a 150 s 3 BBR-CWS vs 3 CUBIC run
at 50 Mbit/s, 40 ms, 1 BDP, with tables at realistic sizes in the run-directory contract's shape:
iperf3 100 ms intervals, ss every 10 ms, qdisc every 10 ms, tcp_probe at 500 events/s per flow,
cc_state at 100 Hz. Targets: <= 5 s and <= 10 MB.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.report_fixtures

TARGET_S = 5.0
TARGET_MB = 10.0


def synthesize(parent: Path) -> Path:
    from tests.report_fixtures import FlowSpec, RunSpec, make_run
    flows = [FlowSpec("bbr_cws", 40) for _ in range(3)] + [FlowSpec("cubic", 40) for _ in range(3)]
    return make_run(parent, RunSpec(scenario="bench-3v3", flows=flows, rate_mbps=50, buffer_bdp=1,
                                    duration_s=150, ss_interval_ms=10, qdisc_interval_ms=10,
                                    tcp_probe_hz=500, cc_state_hz=100, matrix={"buffer_bdp": 1}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", nargs="?", type=Path, help="an existing run dir (default: synthesise one)")
    ap.add_argument("--keep", type=Path, help="write the synthetic run and the report here")
    ap.add_argument("--repeat", type=int, default=1, help="report this many times, print the best")
    args = ap.parse_args()

    from cctest.report.build import Options, write_report

    work = args.keep or Path(tempfile.mkdtemp(prefix="cctest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.run_dir:
        run_dir = args.run_dir
    else:
        t = time.perf_counter()
        run_dir = synthesize(work / "runs")
        print(f"synthesised {run_dir} in {time.perf_counter() - t:.1f} s")
    import pandas as pd
    rows = {p.stem: len(pd.read_parquet(p)) for p in sorted(run_dir.glob("*.parquet"))}
    print("rows: " + ", ".join(f"{k} {v:,}" for k, v in rows.items()))
    best = float("inf")
    out = work / "report" / "report.html"
    for _ in range(max(1, args.repeat)):
        t = time.perf_counter()
        res = write_report([run_dir], out, Options())
        best = min(best, time.perf_counter() - t)
    mb = out.stat().st_size / 1e6
    print(f"report time {best:.2f} s (target <= {TARGET_S:g} s), HTML {mb:.2f} MB (target <= {TARGET_MB:g} MB), "
          f"{res.figures} figures -> {out}")
    return 0 if best <= TARGET_S and mb <= TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
