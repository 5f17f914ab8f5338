"""cpu: the CPUs' time counters from /proc/stat every half second -> raw/cpu.jsonl -> the cpu
table (busy share per interval; analysis/checks.py `cpu_busy` judges whether the run was CPU-bound)."""

from __future__ import annotations

import json
import threading
import time
from itertools import pairwise
from typing import TYPE_CHECKING, TextIO

from .base import NS_PER_S, SAMPLING, Capture, RunView, StartContext, Undo
from .sampler import PeriodicSampler, start_threads

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

CPU_INTERVAL_S = 0.5  # /proc/stat ticks are 10 ms: half a second resolves busy fractions to 2 %


class CpuSampler(PeriodicSampler):
    """The CPU time counters of /proc/stat (all CPUs together, then each), in the kernel's ticks.

    Busy time over an interval is what was not idle or waiting on I/O. Inside a VM on the virtual
    clock these are guest ticks, so a saturated emulated CPU shows as busy ~100 % of guest time:
    the run was limited by the CPU rather than the link (analysis/checks.py `cpu_busy`).
    """

    def __init__(self, interval_s: float, log: TextIO, lock: threading.Lock, stat_path: str = "/proc/stat") -> None:
        super().__init__("cpu", interval_s, log, lock)
        self.stat_path = stat_path

    def sample(self) -> str:
        with open(self.stat_path) as f:
            text = f.read()
        stamp = time.monotonic_ns()
        counters = {}
        for line in text.splitlines():
            name, *values = line.split()
            if name.startswith("cpu"):
                counters[name] = [int(v) for v in values[:8]]
        return json.dumps({"t_ns": stamp, "cpu": counters}, separators=(",", ":")) + "\n"


# /proc/stat columns: user nice system idle iowait irq softirq steal. Idle and I/O wait are the
# CPU waiting; everything else is work (softirq is where the emulated network's packets are moved).
_IDLE_COLUMNS = (3, 4)


def parse_cpu_stat(text: str) -> pd.DataFrame:
    """raw/cpu.jsonl -> one row per CPU ("cpu" = all together) per interval between samples:
    t_ns (interval end), interval_s, busy_frac (non-idle share of the ticks counted in it)."""
    import pandas as pd

    samples = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            samples.append((int(rec["t_ns"]), {k: [int(x) for x in v] for k, v in rec["cpu"].items()}))
        except (ValueError, KeyError, TypeError):
            continue
    rows = []
    for (t_prev, prev), (t_now, now) in pairwise(samples):
        for cpu, ticks in now.items():
            before = prev.get(cpu)
            if before is None or len(before) != len(ticks):
                continue
            delta = [b - a for a, b in zip(before, ticks, strict=True)]
            total = sum(delta)
            if total <= 0:
                continue
            idle = sum(delta[i] for i in _IDLE_COLUMNS if i < len(delta))
            rows.append({"t_ns": t_now, "cpu": cpu, "interval_s": (t_now - t_prev) / NS_PER_S,
                         "busy_frac": 1.0 - idle / total})
    return pd.DataFrame(rows, columns=["t_ns", "cpu", "interval_s", "busy_frac"])


class Cpu(Capture):
    name = "cpu"
    raw_files = ("cpu.jsonl",)
    tables = {"cpu": ("run_id", "t_s", "cpu", "interval_s", "busy_frac")}
    starts = SAMPLING

    def start(self, ctx: StartContext, undo: Undo) -> None:
        log = open(ctx.raw / "cpu.jsonl", "w")
        undo.callback(log.close)
        start_threads([CpuSampler(CPU_INTERVAL_S, log, threading.Lock())], undo, ctx.warnings)

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        text = raw.get("cpu.jsonl")
        if text is None:
            return {}
        cpu = parse_cpu_stat(text)
        cpu["t_s"] = run.t_s(cpu["t_ns"])
        return {"cpu": self.finish("cpu", cpu, run, strings=("cpu",))}
