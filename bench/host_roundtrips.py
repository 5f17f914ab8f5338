"""What this host charges for the operations a UML guest is made of, to compare hosts.

    .venv/bin/python bench/host_roundtrips.py

A UML guest's cost is mostly host round trips: its kernel stops each guest system call with ptrace
and switches between host processes, so the same run costs several times more host time on one
host than on another (docs/measurements.md, "A guest second's price is the host's"). This compiles
bench/c/host_roundtrips.c with the system's C compiler and prints nanoseconds per plain system
call, per system call stopped and resumed by a ptrace tracer, and per context switch (pipe
ping-pong), each the median of 5 rounds, with the CPU model, the CPU count and the load average:
a loaded host inflates the last two (the tracer waits for a CPU), so compare quiet figures only.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "c" / "host_roundtrips.c"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


def measure() -> dict[str, float]:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("host_roundtrips: no C compiler (cc or gcc) on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "host_roundtrips"
        subprocess.run([compiler, "-O2", "-o", str(binary), str(SOURCE)], check=True)
        out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return {name: float(value) for name, value in (line.split() for line in out.splitlines())}


def main() -> None:
    load = os.getloadavg()[0]
    figures = measure()
    print(f"host: {cpu_model()}, {os.cpu_count()} CPUs, kernel {platform.release()}, load average {load:.1f}")
    print(f"{'operation':<16} {'ns':>9}")
    for name, ns in figures.items():
        print(f"{name:<16} {ns:>9.0f}")


if __name__ == "__main__":
    main()
