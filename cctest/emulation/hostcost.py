"""What `--vm` sessions have cost on this host against the cost model's estimate.

The model (cctest/model/plan.py, VM_COSTS) is fitted on one host, and a guest's cost is mostly
round trips between host processes (every guest system call is a ptrace stop under UML), whose
price differs from host to host several times over: the same four flows at 80 Mbit/s cost 0.41 host
s per guest s on one 2-core machine and 1.5-1.7 on another (docs/measurements.md). So each session
appends what it measured and what the model had said to a log in the cache, and estimates made on
this host scale the model by the median ratio of its last sessions on the same engine. A UML kernel
series other than the default, or its other userspace mode, is an engine of its own here (its guest
second has another price), logged as `uml-<series>-<mode>`; the default series stays `uml`.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from . import umlkernel

# a session shorter than this is mostly boot and set-up, which the model charges per run
MIN_GUEST_S = 60.0
RECENT = 5
# A guest on the virtual clock keeps its CPU busy all the time it runs, so its share of the slots'
# CPU time says whether it had them to itself. Below this, other work ran beside the guests and the
# session's wall time measured that work too: the estimates pass such a session over.
QUIET_SHARE = 0.8


def cpu_share(cpu_s: float, wall_s: float, slots: int) -> float:
    """The guests' CPU time over what their slots could give them in the session's wall time."""
    return cpu_s / (wall_s * slots) if wall_s > 0 and slots > 0 else 0.0


@dataclass(frozen=True)
class HostFactor:
    """The model's error on this host: measured over estimated wall time, the median of `sessions`."""

    ratio: float
    sessions: int

    def describe(self) -> str:
        plural = "s" if self.sessions != 1 else ""
        return f"x{self.ratio:.2f}, this host's last {self.sessions} session{plural} against the model"


def log_path() -> Path:
    return umlkernel.cache_root().parent / "costs.jsonl"


def host_key() -> str:
    """Which host a session ran on, as far as its cost goes: the CPU model and the CPU count."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return f"{model} x{os.cpu_count() or 1}"


def log_key(engine: str, environ: dict[str, str] | None = None) -> str:
    """What the log calls `engine`'s sessions: `uml` on the default series, `uml-7.2-seccomp` or
    `uml-7.2-ptrace` on 7.2 (chosen as the engine chooses it, $CCTEST_UML_SERIES and
    $CCTEST_UML_USERSPACE), so that another kernel's sessions never scale 6.1's estimates."""
    if engine != "uml":
        return engine
    try:
        chosen = umlkernel.series(environ)
        mode = umlkernel.userspace(chosen, environ)
    except umlkernel.UMLKernelError:
        return engine  # no session can boot it; the estimates keep the engine's own log
    return engine if chosen.name == umlkernel.DEFAULT_SERIES else f"{engine}-{chosen.name}-{mode}"


def remember(engine: str, wall_s: float, estimated_s: float, guest_s: float, slots: int,
             cpu_s: float | None = None) -> None:
    """Add a finished session to the log (with `cpu_s`, the guests' CPU time, its cpu_share); a log
    that cannot be written only costs the next estimate."""
    if guest_s < MIN_GUEST_S or wall_s <= 0 or estimated_s <= 0:
        return
    entry = {"engine": log_key(engine), "host": host_key(), "wall_s": round(wall_s, 1),
             "estimated_s": round(estimated_s, 1), "guest_s": guest_s, "slots": slots,
             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if cpu_s is not None:
        entry["cpu_share"] = round(cpu_share(cpu_s, wall_s, slots), 3)
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as log:
            log.write(json.dumps(entry) + "\n")
    except OSError:
        pass


def host_factor(engine: str) -> HostFactor | None:
    """The median of measured/estimated over this host's last quiet sessions on `engine` (log_key),
    or None when it has none (a line of another shape, e.g. from another version, is passed over, and
    so is a session whose guests had less than QUIET_SHARE of their CPUs)."""
    try:
        lines = log_path().read_text(errors="replace").splitlines()
    except OSError:
        return None
    key, logged, ratios = host_key(), log_key(engine), []
    for line in lines:
        try:
            entry = json.loads(line)
            if entry["engine"] == logged and entry["host"] == key and entry.get("cpu_share", 1.0) >= QUIET_SHARE:
                ratios.append(float(entry["wall_s"]) / float(entry["estimated_s"]))
        except (ValueError, KeyError, TypeError, ZeroDivisionError):
            continue
    recent = [r for r in ratios if 0 < r < math.inf][-RECENT:]
    if not recent:
        return None
    # imported here, on the host: statistics imports random, which reads the kernel's generator when
    # imported, and a guest that imports this module must draw nothing it did not draw before
    import statistics

    return HostFactor(statistics.median(recent), len(recent))
