"""One run, for real, on this kernel: modules -> topology -> captures -> flows -> teardown.

Every side effect is registered for undo the moment it happens (a LIFO Teardown plus the
journal for `cctest clean`), so Ctrl-C, SIGTERM, an exception or a failing flow at any point tears down
what exists and keeps what was measured. The run directory is written as the run goes; its
meta.json ends with status ok, failed or interrupted.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..base.errors import CctestError
from ..host import captures, vmtime
from ..host.captures import iperf3
from ..host.journal import Journal
from ..host.net import traffic
from ..host.net.schedule import LinkSchedule
from ..host.net.topology import Dumbbell, Topologies
from ..host.rundir import base_record, new_run_dir, now_iso, write_meta
from ..kernel import kmod
from ..model import bottleneck, dumbbell, record
from ..model.plan import RunSpec

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import FrameType
    from typing import NoReturn, TypedDict, Unpack

    from rich.progress import TaskID

    class _PhaseFields(TypedDict, total=False):
        """What _phase passes on to Progress.update besides the description."""

        total: float
        completed: float

FLOW_GRACE_S = 20.0  # how long past its end a flow may take before it counts as hung


class RunFailed(CctestError):
    pass


class Interrupted(BaseException):
    """SIGTERM, delivered like Ctrl-C so the same teardown runs."""


def _raise_interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    raise Interrupted(f"signal {signum}")


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """Teardown must finish even if the user presses Ctrl-C again."""
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def _progress(console: Console, live: bool) -> Progress:
    """A live bar on a real terminal. Inside a VM it stays off (each phase prints one line instead):
    redrawing ten times a second costs the emulated CPU and a console write each time, and its
    times would be guest seconds anyway."""
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
        TextColumn("remaining"), TimeRemainingColumn(), console=console, transient=False, disable=not live,
    )


class Run:
    def __init__(self, spec: RunSpec, out_root: Path, mode: str, journal: Journal, console: Console,
                 release: str, topologies: Topologies, with_fq: bool = True, with_tracer: bool = True,
                 vm_boot: dict | None = None, root_sysctls: dict | None = None):
        self.spec = spec
        self.mode = mode
        self.journal = journal
        self.console = console
        self.release = release
        self.with_fq = with_fq
        self.with_tracer = with_tracer
        self.topologies = topologies  # the session's: consecutive runs can share one topology
        self.root_sysctls = root_sysctls or {}  # what the session raised (net.rootsysctl), for meta.json
        self.status = "failed"  # until the flows have run; then "ok", or "interrupted"
        if mode == "vm":
            vmtime.sync_realtime()
        self.dir = new_run_dir(out_root, spec)
        self.raw = self.dir / "raw"
        self.record = base_record(self.dir, spec, mode)
        self.record.phase_s = {}
        self.record.vm = vmtime.vm_record(vm_boot)
        self.clock = vmtime.PhaseClock(self.record.phase_s, self.record.vm)
        # the record's lists, filled in place as the run goes
        self.warnings: list[str] = []
        self.modules: list[record.Module] = []
        self.record.warnings, self.record.modules = self.warnings, self.modules
        self.flows: list[record.Flow] = self.record.flows or []
        write_meta(self.dir, self.record)

    # -- phases -------------------------------------------------------------------------------

    def _load_modules(self, undo: Teardown) -> None:
        for cc, params in self.spec.modules.items():
            loaded = kmod.load(cc, params, self.release, on_loaded=self.journal.add_module,
                               where=self.spec.params_key(cc))
            if loaded.loaded_by_us:
                name = kmod.module_name(loaded.name)
                self.journal.module_loaded(name)
                undo.callback(self._unload_module, name)
            self.modules.append(record.Module(**loaded.as_meta()))
            # Registered after the unload, so it runs before it (LIFO): the counter dies with the module.
            undo.callback(self._note_fallbacks, loaded, kmod.fallback_count(kmod.module_name(loaded.name)))
        available = kmod.available_ccs()
        missing = [cc for cc in self.spec.modules if cc not in available]
        if missing:
            raise RunFailed(f"congestion control(s) {', '.join(missing)} not in tcp_available_congestion_control")

    def _unload_module(self, name: str) -> None:
        kmod.unload(name)
        self.journal.module_unloaded(name)

    def _start_captures(self, phase: str, ctx: captures.StartContext, undo: Teardown) -> None:
        """Start every capture that starts in this phase (cctest/host/captures/, in registry order)."""
        for capture in captures.starting_in(phase):
            handle = capture.start(ctx, undo)
            if handle is not None:
                ctx.running[capture.name] = handle

    def _warm_up_captures(self, ctx: captures.StartContext, progress: Progress, task: TaskID) -> None:
        """Wait, each in its own phase, for the captures that need time to be ready (the tracer)."""
        for capture in captures.REGISTRY:
            if capture.warm_up_phase and capture.name in ctx.running:
                self._phase(progress, task, capture.warm_up_phase)
                capture.warm_up(ctx, ctx.running[capture.name])

    def _build_network(self, undo: Teardown, progress: Progress, task: TaskID) -> Dumbbell:
        net, reused = self.topologies.acquire(self.spec, self.with_fq)
        # Kept for the next run only if this one ends well; otherwise torn down with it.
        undo.callback(lambda: self.topologies.release(net, keep=self.status == "ok"))
        self.record.topology = "reused from the previous run" if reused else "built"
        if reused:
            self.clock.rename("reshape topology")  # this phase's time, under its true name
            progress.update(task, description="reshape topology")
            if progress.disable:
                self.console.print("  (the previous run's hosts and links: reshape topology)", highlight=False)
            settings = net.settings
        else:
            nodes = [name for flow in self.spec.flows for name in (flow.sender, flow.receiver)]
            switches = [dumbbell.LEFT_SWITCH, dumbbell.RIGHT_SWITCH]
            ifaces = [iface for link in dumbbell.links(self.spec) for iface in (link.iface1, link.iface2)]
            self.journal.add_topology(nodes + switches, switches + ifaces)  # before: a kill mid-build
            net.build()
            for pid in net.host_pids():
                self.journal.add_process(pid, "Mininet host shell")
            settings = net.configure()
        self.record.offloads = settings["offloads"]
        self.record.sysctls = {
            **{key: record.Sysctl(old=None, new=value, scope="every host's network namespace (discarded with it)")
               for key, value in settings["host_sysctls"].items()},
            **{key: record.Sysctl(old=None, new=value, scope="each sender's network namespace (discarded with it)")
               for key, value in settings["sender_sysctls"].items()},
            **{key: record.Sysctl(**change) for key, change in self.root_sysctls.items()},
        }
        self.record.qdisc_plan = {q.iface: record.PlannedQdisc(role=q.role, node=q.node or "root", tc=list(q.tc))
                                  for q in dumbbell.qdiscs(self.spec, self.with_fq)}
        if self.spec.link.ecn:
            self._negotiate_ecn(net, undo)
        return net

    def _negotiate_ecn(self, net: Dumbbell, undo: Teardown) -> None:
        """ECN on in every sender's and receiver's namespace for this run; the old values come back
        after it (a reused topology's next run may not want ECN)."""
        old = None
        for flow in self.spec.flows:
            for node in (flow.sender, flow.receiver):
                old = net.set_sysctl(node, bottleneck.ECN_SYSCTL, "1")
                undo.callback(net.set_sysctl, node, bottleneck.ECN_SYSCTL, old)
        assert self.record.sysctls is not None  # set with the network, before ECN
        self.record.sysctls[bottleneck.ECN_SYSCTL] = record.Sysctl(
            old=old, new="1", scope="each sender's and receiver's network namespace (restored after the run)")

    def _prepare_link_schedule(self, undo: Teardown) -> LinkSchedule | None:
        """The timed link changes' tc process (rate steps, outages), started before time zero; its
        undo ends it and records when each change took effect (meta.json rate_schedule_applied,
        outages_applied)."""
        link = self.spec.link
        changes = bottleneck.timed_changes(link, dumbbell.BOTTLENECK_IFACE, dumbbell.loss_ifaces(self.spec))
        if not changes:
            return None
        schedule = LinkSchedule(changes)
        self.journal.add_process(schedule.pid, "tc link schedule")

        def stop() -> None:
            schedule.stop(vmtime.stretch(10))
            if link.rate_schedule:
                self.record.rate_schedule_applied = [record.AppliedRateStep(**a) for a in schedule.rate_steps_applied()]
            if link.outages:
                self.record.outages_applied = [record.AppliedOutage(**a) for a in schedule.outages_applied()]
            if schedule.error or len(schedule.applied) < len(changes) and self.status == "ok":
                self.warnings.append(f"link schedule: {len(schedule.applied)} of {len(changes)} "
                                             f"changes applied{'; ' + schedule.error if schedule.error else ''}")

        undo.callback(stop)
        return schedule

    def _run_flows(self, net: Dumbbell, undo: Teardown, progress: Progress, task: TaskID) -> None:
        for flow in self.spec.flows:
            server = traffic.start_server(net.host(flow.receiver), flow, self.raw)
            self.journal.add_process(server.pid, f"iperf3 server {flow.receiver}")
            undo.callback(_terminate, server)
        for flow in self.spec.flows:
            traffic.wait_listening(net.host(flow.receiver), flow.server_port)

        schedule = self._prepare_link_schedule(undo)
        clients: dict[int, subprocess.Popen] = {}
        for flow in self.spec.flows:
            proc = traffic.prepare_client(net.host(flow.sender), flow, self.raw)
            self.journal.add_process(proc.pid, f"iperf3 client {flow.sender}")
            undo.callback(_terminate, proc)
            clients[flow.index] = proc
        started: set[int] = set()
        pending = sorted(self.spec.flows, key=lambda f: f.start_s)
        duration = self.spec.scenario.duration_s
        self._phase(progress, task, "flows", total=duration, completed=0)
        # Time zero last: anything between it and the first trigger (a progress redraw can take
        # tens of ms under emulation) would make the flows that start at 0 late.
        t0 = time.monotonic_ns()
        self.record.t0_monotonic_ns = t0
        if schedule is not None:
            schedule.start(t0)
        self.record.flows_started_at = now_iso()
        deadline = duration + FLOW_GRACE_S
        while True:
            now = (time.monotonic_ns() - t0) / 1e9
            launched_now = False
            while pending and pending[0].start_s <= now:
                flow = pending.pop(0)
                traffic.trigger(clients[flow.index])
                started.add(flow.index)
                self.flows[flow.index].launched_s = round((time.monotonic_ns() - t0) / 1e9, 4)
                launched_now = True
            if launched_now:
                write_meta(self.dir, self.record)  # the run directory says which flows are running
            for index in started:
                code = clients[index].poll()
                if code is not None and self.flows[index].exit_code is None:
                    self.flows[index].exit_code = code
                    if code != 0:
                        raise RunFailed(f"flow {index} ({self.spec.flows[index].cc}) failed: iperf3 exited with {code}"
                                        f" (see raw/{iperf3.client_file(index)})")
            if not pending and all(clients[i].poll() is not None for i in started):
                break
            if now > deadline:
                raise RunFailed(f"flows still running {FLOW_GRACE_S:g} s after the scenario's end")
            progress.update(task, completed=min(now, duration))
            # Wake in time for the next start rather than on the next 50 ms tick.
            time.sleep(min(0.05, pending[0].start_s - now) if pending else 0.05)
        progress.update(task, completed=duration)
        write_meta(self.dir, self.record)

    def _phase(self, progress: Progress, task: TaskID, name: str, **fields: Unpack[_PhaseFields]) -> None:
        """Show the phase, and record how long each phase took (meta.json phase_s: where time goes)."""
        self.clock.switch(None if name == "done" else name)
        if progress.disable and name != "done":
            self.console.print(f"  {name}", highlight=False)
        progress.update(task, description=name, **fields)

    # -- the whole run --------------------------------------------------------------------------

    def execute(self) -> Path:
        error = None
        undo = Teardown(self.warnings)
        with _progress(self.console, live=self.record.vm is None) as progress, signals_as_interrupts():
            task = progress.add_task("", total=None)
            self._phase(progress, task, "load modules")
            try:
                self._load_modules(undo)
                ctx = captures.StartContext(self.spec, self.raw, self.journal, self.warnings,
                                            with_tracer=self.with_tracer, record=self.record)
                self._phase(progress, task, captures.TRACING)
                self._start_captures(captures.TRACING, ctx, undo)
                self._phase(progress, task, "build topology")
                net = ctx.net = self._build_network(undo, progress, task)
                undo.callback(self._snapshot_qdiscs, net)
                # Samplers first: they are running steadily by time zero (samples before it are kept).
                self._start_captures(captures.SAMPLING, ctx, undo)
                self._warm_up_captures(ctx, progress, task)
                # After the tracer has attached: attaching is CPU-heavy and would inflate the pings.
                self._phase(progress, task, captures.BASE_RTT)
                self._start_captures(captures.BASE_RTT, ctx, undo)
                self._run_flows(net, undo, progress, task)
                self.status = "ok"
            except (KeyboardInterrupt, Interrupted):
                self.status, error = "interrupted", "interrupted by the user (SIGINT/SIGTERM)"
                raise
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                self._phase(progress, task, "teardown")
                with uninterruptible():
                    undo.close()
                    self._phase(progress, task, "done")
                    vmtime.add_totals(self.record.vm)
                    self.record.status, self.record.error, self.record.end_time = self.status, error, now_iso()
                    write_meta(self.dir, self.record)
        return self.dir

    def _note_fallbacks(self, loaded: kmod.LoadedModule, at_load: int | None) -> None:
        """How many sockets ran the module's allocation-failure fallback during the run (its counter
        now minus at load); any is a mark on the run: those flows did not run the algorithm."""
        now = kmod.fallback_count(kmod.module_name(loaded.name))
        if now is None or at_load is None:
            return
        count = now - at_load
        entry = next(m for m in self.modules if m.name == loaded.name)
        entry.fallbacks = count
        if count > 0:
            self.record.fallback_sockets = (self.record.fallback_sockets or 0) + count
            self.warnings.append(
                f"{loaded.name}: {count} socket(s) ran the allocation-failure fallback, not {loaded.name} "
                "(see modules/README.md)")

    @property
    def torn_down_cleanly(self) -> bool:
        return not any(w.startswith("teardown:") for w in self.warnings)

    def _snapshot_qdiscs(self, net: Dumbbell) -> None:
        with contextlib.suppress(Exception):
            self.record.qdiscs = net.qdisc_snapshot()


class Teardown:
    """LIFO undo actions; every action runs even when an earlier one fails (failures are noted)."""

    def __init__(self, warnings: list[str]):
        self.actions: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        self.warnings = warnings

    def callback(self, fn: Callable[..., object], *args: object) -> None:
        self.actions.append((fn, args))

    def close(self) -> None:
        while self.actions:
            fn, args = self.actions.pop()
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - keep tearing down
                self.warnings.append(f"teardown: {getattr(fn, '__qualname__', fn)} failed: {exc}")


def _terminate(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=vmtime.stretch(5))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
