"""Where a run's numbers came from, as the page and the summary files state it: the clock it ran on
(a VM's virtual clock and its icount shift, or the wall clock), the code (cctest version, git
commit, a dirty tree), the seed and the bottleneck as configured (aqm, ecn, rate schedule,
outages). Everything is read from meta.json; nothing is guessed beyond saying what is missing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.record import Code, Engine, EngineKernel, Link, Outage, RunRecord, Vm

if TYPE_CHECKING:
    from .load import Run

MAX_SCENARIO_BYTES = 200_000  # a resolved scenario.yaml is a few kB; more is not shown on the page


def clock_of(record: RunRecord) -> str:
    """'virtual' (QEMU's instruction counter), 'wall' (a VM on the host's clock), 'native' (the host's
    own kernel and clock), or 'unrecorded' (a VM run from before cctest recorded its clock)."""
    if record.mode == "native":
        return "native"
    if record.vm is not None and record.vm.clock in ("virtual", "wall"):
        return record.vm.clock
    return "unrecorded"


def provenance(record: RunRecord) -> dict[str, Any]:
    """The columns summary.csv/json carry per run (docs/run-directory.md, "The report's files")."""
    vm, code, link = record.vm or Vm(), record.cctest or Code(), record.link or Link()
    commit = str(code.git_commit or "") or None
    dirty = commit.endswith("-dirty") if commit else None
    return {
        "mode": record.mode, "clock": clock_of(record),
        "icount_shift": vm.icount_shift if clock_of(record) == "virtual" else None,
        "kvm": vm.kvm, "cctest_version": code.version,
        "git_commit": commit.removesuffix("-dirty") if commit else None, "git_dirty": dirty,
        "seed": record.seed, "aqm": link.aqm or "fifo", "ecn": bool(link.ecn),
        "rate_schedule": "; ".join(f"{s.rate_mbps} Mbit/s at {s.at_s} s" for s in link.rate_schedule or []),
        "outages": "; ".join(f"{o.at_s}-{_end(o)} s" for o in link.outages or []),
        "module_builds": module_builds(record), "engine_build": engine_build(record),
    }


def module_builds(record: RunRecord) -> str:
    """The builds of the modules the run loaded, "name=sha12 ..." sorted by name ("" when it used
    only the kernel's own): what one verdict may not mix (claims.one_build)."""
    builds = {}
    for module in record.modules or []:
        if module.name and module.sha256:
            builds[module.name] = module.sha256[:12]
    return " ".join(f"{name}={sha}" for name, sha in sorted(builds.items()))


def engine_build(record: RunRecord) -> str:
    """The engine and the kernel build it ran, e.g. "uml 6.1.192 c5cd4796fcaf", "qemu 6.1.0-28-amd64",
    "native 6.8.0-45-generic": what one verdict may not mix either."""
    engine = record.engine or Engine()
    kernel = engine.kernel or EngineKernel()
    name = engine.name or ("native" if record.mode == "native" else "qemu" if record.mode else "")
    release = kernel.release or (record.kernel.release if record.kernel else None) or ""
    build = str(kernel.inputs_sha256 or kernel.image or "")[:12]
    return " ".join(str(x) for x in (name, release, build) if x)


def _end(outage: Outage) -> str:
    if outage.at_s is None or outage.duration_s is None:
        return "?"
    return f"{float(outage.at_s) + float(outage.duration_s):g}"


def clock_text(record: RunRecord) -> str:
    """The clock in words, for the run's header."""
    clock = clock_of(record)
    vm = record.vm or Vm()
    if clock == "virtual":
        return f"VM, virtual clock (icount shift {vm.icount_shift})"
    if clock == "wall":
        return "VM, WALL clock (" + ("KVM" if vm.kvm else "software emulation") + \
            ": results depend on how busy the host was)"
    if clock == "native":
        return "native (this host's kernel and clock)"
    return "VM, clock not recorded (a run from before cctest recorded it)"


def is_wall_clock(record: RunRecord) -> bool:
    """A VM run on the host's clock: software emulation falls behind its timers by however much the
    host's load says, so its numbers carry that doubt wherever they are shown."""
    return clock_of(record) == "wall"


def code_text(record: RunRecord) -> str:
    p = provenance(record)
    commit = p["git_commit"][:12] if p["git_commit"] else "commit not recorded"
    dirty = " (dirty tree: uncommitted changes)" if p["git_dirty"] else ""
    return f"cctest {p['cctest_version'] or '?'} @ {commit}" + dirty


def bottleneck_text(record: RunRecord) -> str:
    p = provenance(record)
    parts = [p["aqm"] + (" with ECN marking" if p["ecn"] else "")]
    if p["rate_schedule"]:
        parts.append(f"rate schedule {p['rate_schedule']}")
    if p["outages"]:
        parts.append(f"outages {p['outages']}")
    return ", ".join(parts)


def scenario_yaml(run: Run | Path | str) -> str | None:
    """The run's resolved scenario.yaml as text, or None when absent or unreadable. `run`: a
    analysis.load.Run (a compact record carries the text) or a run directory's path."""
    from ..base.safeload import Refused
    from ..model import runfiles

    recorded = getattr(run, "recorded", None)
    if recorded is not None:
        return recorded.scenario_yaml
    run_path = run if isinstance(run, (Path, str)) else run.path
    try:  # the one reader of run directories: a link to a secret never reaches a shared page
        data = runfiles.read_bytes(run_path, "scenario.yaml", MAX_SCENARIO_BYTES, "a scenario.yaml")
    except Refused:
        return None
    return None if data is None else data.decode("utf-8", errors="replace")


def scenario_tags(run: Run | Path | str) -> list[str]:
    """The tags of the scenario as run (its scenario.yaml; `run` as scenario_yaml takes it), or none
    when it cannot be read. Read with the bounded loader: a run directory may come from anywhere (an
    alias bomb stays harmless)."""
    text = scenario_yaml(run)
    if not text:
        return []
    from ..base.safeload import Refused, load_yaml

    try:
        data = load_yaml(text)
    except Refused:
        return []
    tags = data.get("tags") if isinstance(data, dict) else None
    return [str(t) for t in tags] if isinstance(tags, list) else []
