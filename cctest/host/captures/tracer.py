"""The run's one tracer, and the TracedCapture that adds probes to it (tcp_probe.py: the kernel's
tcp_probe per data connection; cc_state.py: each module's state tracepoint). The tracer records
every probe of a run into one raw log, by one of two means:

- bpftrace (raw/bpftrace.log, running the script raw/capture.bt): a probe can thin its events in
  the kernel, so the log stays small; it needs BPF with perf events, which the UML engine's kernel
  lacks, and 8-20 s to attach under QEMU;
- tracefs (raw/tracefs.log, `trace_pipe` of an instance of our own with each probe's filter and
  the `mono` clock): needs nothing but tracefs; every event is logged, and a capture that thins in
  bpftrace thins at ingest instead.

The UML engine always uses tracefs; elsewhere bpftrace where it is installed, else tracefs.
CCTEST_TRACER=tracefs|bpftrace chooses. One tracer for every probe: a second bpftrace would pay its
attach time again, and one log keeps all events on one clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import tracefs
from ..tools import which
from ..vmtime import stretch
from .base import TRACING, Capture, StartContext, Undo
from .sampler import ProcessCapture

TRACERS = ("bpftrace", "tracefs")
LOGS = ("bpftrace.log", "tracefs.log")  # the raw log of either tracer: what a TracedCapture parses
SCRIPT = "capture.bt"
BPFTRACE_ATTACH_TIMEOUT_S = 60.0  # attaching takes 8-20 s under emulation (docs/emulation.md)


@dataclass(frozen=True)
class ServerPorts:
    """The flows' server ports, lowest to highest: a probe keeps the events of the flows' data
    connections by their destination port."""

    low: int
    high: int

    @classmethod
    def of(cls, spec: Any) -> ServerPorts:
        ports = [flow.server_port for flow in spec.flows]
        return cls(min(ports), max(ports))

    @property
    def bpftrace(self) -> str:
        """A bpftrace predicate on a tracepoint with a `dport` field."""
        return f"/args->dport >= {self.low} && args->dport <= {self.high}/"

    @property
    def tracefs(self) -> str:
        """A tracefs event filter on the same field."""
        return f"dport >= {self.low} && dport <= {self.high}"


@dataclass
class Probes:
    """What a TracedCapture adds to the run's tracer: its lines of the bpftrace script, what the
    script's END block must do for them, and the tracefs events (system, event, filter) that record
    the same where bpftrace cannot run. The script is one program and its log one file: a capture's
    maps are named apart from the others', and the lines it prints open with a tag of its own (P,
    S)."""

    bpftrace: list[str]
    events: list[tuple[str, str, str]]
    at_end: list[str] = field(default_factory=list)  # e.g. clear(@last);: bpftrace prints maps left at exit


class TracedCapture(Capture):
    """A capture the run's tracer records: whether a run wants it and what it adds to the tracer
    are its own; its raw files are the tracer's log, from which it parses its events."""

    raw_files = LOGS
    label: str = ""  # its events, as the tracer's warnings name what a run lacks

    def traces(self, spec: Any) -> bool:
        """Whether this run (a plan.RunSpec) records it: its switch among the scenario's capture options."""
        return False

    def probes(self, ctx: StartContext) -> Probes | None:
        """Its probes for this run, None for none. Asked once tracefs is mounted: a probe may read
        an event's format there."""
        return None


def choose_tracer(bpftrace_installed: bool, environ: dict[str, str] | None = None) -> str | None:
    """Which tracer records the probes here, or None when none can."""
    env = os.environ if environ is None else environ
    forced = env.get("CCTEST_TRACER", "")
    if forced and forced not in TRACERS:
        from ...base.errors import BadInput

        raise BadInput(f"CCTEST_TRACER={forced}: allowed values are {', '.join(TRACERS)}")
    if forced:
        return forced
    if env.get("CCTEST_VM_ENGINE") == "uml" or not bpftrace_installed:
        return "tracefs"  # the tracer mounts tracefs if it is absent; a kernel without it fails at start
    return "bpftrace"


def bpftrace_script(probes: list[Probes]) -> str:
    lines = [line for p in probes for line in p.bpftrace]
    at_end = [statement for p in probes for statement in p.at_end]
    if at_end:
        lines.append(f"END {{ {' '.join(at_end)} }}")
    return "\n".join(lines) + "\n"


def tracefs_events(probes: list[Probes]) -> list[tuple[str, str, str]]:
    return [event for p in probes for event in p.events]


def listed(labels: list[str], last: str) -> str:
    """'a', 'a or b', 'a, b or c' (last: "or"; "and" likewise)."""
    return f" {last} ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 2 else labels)


class Tracer(Capture):
    """Started when a run wants any of its TracedCaptures and a tracer serves here (the session's
    choose_tracer), before the topology is built: bpftrace attaches while the hosts come up."""

    name = "tracer"
    other_files = (SCRIPT,)
    starts = TRACING
    warm_up_phase = "warm-up: wait for the tracer"  # bpftrace attaching; tracefs records at once

    def __init__(self, captures: Iterable[Capture]):
        self.traced = tuple(c for c in captures if isinstance(c, TracedCapture))

    def wanted(self, spec: Any) -> list[TracedCapture]:
        return [c for c in self.traced if c.traces(spec)]

    def lacking(self, ctx: StartContext) -> str:
        """What a run whose tracer failed lacks, for its warnings."""
        return f"no {listed([c.label for c in self.wanted(ctx.spec)], 'or')} traces"

    def start(self, ctx: StartContext, undo: Undo) -> ProcessCapture | tracefs.Recorder | None:
        wanted = self.wanted(ctx.spec)
        if not ctx.with_tracer or not wanted:
            return None
        self._mount_tracefs(ctx, undo)
        probes = [p for c in wanted if (p := c.probes(ctx)) is not None]
        if not probes:
            return None
        if choose_tracer(which("bpftrace") is not None) == "tracefs":
            return self._start_tracefs(ctx, undo, probes)
        script = ctx.raw / SCRIPT
        script.write_text(bpftrace_script(probes))
        tracer = ProcessCapture("bpftrace", ["bpftrace", str(script)], ctx.raw / LOGS[0])
        ctx.journal.add_process(tracer.pid, "bpftrace")
        undo.callback(tracer.stop)
        return tracer

    def _mount_tracefs(self, ctx: StartContext, undo: Undo) -> None:
        """Both tracers need tracefs: mounted (journaled first) only if none is reachable, and
        then unmounted after the tracer has stopped (undo runs last in, first out)."""
        mounted = tracefs.mount_if_absent(ctx.journal.add_mount)
        if mounted is not None:
            ctx.record.tracefs = f"mounted at {mounted} for this run, unmounted at its end"
            undo.callback(self._unmount_tracefs, ctx, mounted)

    def _unmount_tracefs(self, ctx: StartContext, path: Path) -> None:
        tracefs.unmount(path)
        ctx.journal.mount_removed(str(path))

    def _start_tracefs(self, ctx: StartContext, undo: Undo, probes: list[Probes]) -> tracefs.Recorder | None:
        root = tracefs.mounted()
        if root is None:
            ctx.warnings.append(f"no tracefs mounted; {self.lacking(ctx)}")
            return None
        recorder = tracefs.Recorder(root, tracefs_events(probes), ctx.raw / LOGS[1], ctx.journal)
        try:
            recorder.start()
        except tracefs.TracefsError as error:
            ctx.warnings.append(f"{error}; {self.lacking(ctx)}")
            return None
        ctx.journal.add_process(recorder.pid, "cat trace_pipe")

        def stop() -> None:
            lost = recorder.stop(stretch(tracefs.DRAIN_TIMEOUT_S))
            if lost:
                traced = listed([c.label for c in self.wanted(ctx.spec)], "and")
                ctx.warnings.append(f"tracefs: {lost} events lost (buffer overrun): the {traced} traces have gaps")

        undo.callback(stop)
        return recorder

    def warm_up(self, ctx: StartContext, tracer: ProcessCapture | tracefs.Recorder) -> None:
        if isinstance(tracer, tracefs.Recorder):
            if not tracer.alive():
                ctx.warnings.append(f"the tracefs reader ended at once; {self.lacking(ctx)}")
            return  # recording from the moment its events were enabled
        if not tracer.wait_for("Attaching", stretch(BPFTRACE_ATTACH_TIMEOUT_S)):
            ctx.warnings.append(f"bpftrace did not attach; {self.lacking(ctx)}")
