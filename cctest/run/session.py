"""A `cctest run` invocation: pick native or VM, run every RunSpec, make the tables.

Native: take the lock, build modules for the running kernel, run each spec, ingest each run dir.
VM: build modules for the guest kernel on the host, write each guest the runs it makes into its plan
file (cctest/model/guestplan.py), boot the guests, each running `cctest guest-run PLAN` (those runs,
natively, without ingest), then ingest the run dirs they list in their manifests.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ..base import errors, filelock
from ..base.errors import BadInput, CctestError, printable, say
from ..emulation import engines, vm
from ..host import cgroup, vmtime
from ..host.journal import Journal
from ..host.rundir import engine_meta, host_facts, write_meta
from ..host.tools import which
from ..kernel import kmod
from ..model import guestplan
from ..model.plan import RunSpec, estimated_wall_s, split_for_vms
from ..model.record import as_interrupted, check_version, read_parts, status_as_written
from . import doctor

if TYPE_CHECKING:
    from ..emulation.hostcost import HostFactor


@dataclass(kw_only=True)
class RunOptions:
    """What a session was asked for (`cctest run`, or a guest's `cctest guest-run`), given by keyword:
    too many fields to place by position."""

    source: Path  # the file the runs come from, named in messages: the experiments file, or a guest's plan
    names: list[str]
    out: Path
    mode: str  # auto | native | vm
    kernel: str | None
    kvm: bool
    ingest: bool = True  # a guest leaves the tables to the host
    in_vm: bool = False  # the runs are a guest's (cctest guest-run)
    manifest: Path | None = None  # a guest lists each run directory here as it starts it
    clock: vm.VMClock | None = None  # --vm only
    jobs: int | None = None  # VMs in parallel; None: the host's cores on the virtual clock, else 1
    engine: str = engines.DEFAULT_ENGINE  # --vm only: qemu | uml (cctest/emulation/engines.py)
    resume: bool = False  # skip the runs --out holds made by this commit on this engine (run/resume.py)


class SessionError(CctestError):
    """A one-line reason the session could not finish."""


def finalize(run_dir: Path, console: Console) -> None:
    """Raw captures -> tidy tables and the health verdict. Safe on partial (interrupted) runs."""
    from ..analysis import checks
    from ..analysis.ingest import check_products, ingest_run, read_meta

    data = read_meta(run_dir)
    check_version(data, run_dir / "meta.json")  # before anything is rewritten in a format this code does not know
    check_products(run_dir)
    interrupted = as_interrupted(data)
    if interrupted is not None:
        write_meta(run_dir, interrupted)
    tables = ingest_run(run_dir)
    record = read_parts(data, checks.READS, run_dir / "meta.json")
    verdict = checks.write_checks(run_dir, record, tables).get("verdict", "?")
    status = interrupted.status if interrupted is not None else status_as_written(data)
    say(console, (run_dir, "bold"), f": status {status}, emulation health {verdict}")


def finalize_each(run_dirs: list[Path], console: Console, failures: list[str]) -> int:
    """finalize() every run directory; a failure is printed and added to `failures`, never raised:
    it must neither hide the run's own error nor stop the other runs' ingest. Returns the exit code
    the failures mean: 0 for none, 2 when each was bad input (a run directory that cannot work as
    given), else 1."""
    code = 0
    for run_dir in run_dirs:
        try:
            finalize(run_dir, console)
        except Exception as error:  # noqa: BLE001 - reported here and once more at the end
            bad = isinstance(error, BadInput)
            # bad input names its file itself
            failures.append(str(error) if bad else f"{run_dir}: {type(error).__name__}: {error}")
            say(console, (f"ingest of {run_dir} failed: " + (str(error) if bad else f"{type(error).__name__}: {error}"),
                          "red"))
            code = errors.BAD_INPUT if bad and code != errors.FAILED else errors.FAILED
    return code


def raise_for_ingest(failures: list[str]) -> None:
    if failures:
        raise SessionError(f"ingest failed for {len(failures)} run(s) (raw data kept; retry with "
                           f"`cctest ingest`): {failures[0]}" + (" ..." if len(failures) > 1 else ""))


def needs_modules(specs: list[RunSpec]) -> bool:
    """Whether the runs need module loading: this project's modules, or kernel ccs not built in."""
    available = kmod.available_ccs()
    return any(cc in kmod.PROJECT_CCS or cc not in available for spec in specs for cc in spec.modules)


class NativeUnavailable(BadInput):
    """--native was asked for on a host that lacks what the run needs (bad input: exit 2)."""


def choose_mode(requested: str, specs: list[RunSpec], console: Console) -> str:
    """native or vm, probing the host once."""
    if requested == "vm":
        return requested
    results = doctor.checks()
    problems = doctor.native_problems(results, needs_modules(specs))
    if requested == "native":
        if problems:
            raise NativeUnavailable("cannot run natively: "
                                    + "; ".join(f"{c.name}: {c.detail} ({c.fix})" for c in problems))
        return "native"
    if not problems:
        return "native"
    if doctor.vm_problems(results):
        raise SessionError("this host cannot run the scenario natively ("
                           + "; ".join(f"{c.name}: {c.detail}" for c in problems)
                           + ") and the VM path is not set up; see `cctest doctor`")
    console.print("[yellow]notice:[/] running in a virtme-ng VM: the host lacks "
                  + ", ".join(f"{c.name} ({c.detail})" for c in problems))
    return "vm"


def _record(manifest: Path | None, run_dir: Path) -> None:
    if manifest is not None:
        with open(manifest, "a") as f:
            f.write(f"{run_dir}\n")


def check_module_params(specs: list[RunSpec], release: str, source: Path) -> None:
    """Every run's module parameters against the built modules' ranges, before anything runs:
    kmod.BadParameter names the file, scenario, flow key, parameter and allowed values."""
    for spec in specs:
        for cc, params in spec.modules.items():
            kmod.check_params(cc, params, release, f"{source}: {spec.params_key(cc)}")


def require_samplers() -> None:
    """Refuse a run whose ss and qdisc samplers could not start: without pyroute2 they would fail in
    their threads and the run would carry on with empty tables and a warning, measured but unjudgeable."""
    from ..host.captures.base import PYROUTE2_MISSING, pyroute2_installed

    if not pyroute2_installed():
        raise CctestError(PYROUTE2_MISSING)


def run_native(specs: list[RunSpec], opts: RunOptions, console: Console) -> list[Path]:
    from ..host.net import rootsysctl
    from ..host.net.topology import Topologies
    from .runner import Run

    require_samplers()
    release = platform.release()
    specs, made = _resumed(specs, opts, engine_meta("native"), release, console)
    if not specs:
        return made
    journal = Journal()
    journal.acquire(f"pid {journal.data['pid']}: {', '.join(opts.names)}")
    run_dirs: list[Path] = []
    ingest_failures: list[str] = []
    leftovers = False
    topologies = Topologies()
    vm_boot = vmtime.boot_times() if opts.in_vm and vmtime.in_vm_env() else None
    if opts.in_vm:
        vm.watch_stop_file()  # the host's Ctrl-C (vm.stop) reaches this run as a KeyboardInterrupt
    run_cgroup = None
    root_sysctls: dict = {}
    try:
        run_cgroup = enter_cgroup(journal, console)  # before anything is started: all of it is inside
        with_fq, with_tracer = _prepare_host(specs, release, opts)
        root_sysctls = rootsysctl.raise_minimums(journal)
        for spec in specs:
            console.rule(f"{spec.scenario.name} {spec.label} repetition {spec.repetition}")
            run = Run(spec, opts.out, "vm" if opts.in_vm else "native", journal, console, release, topologies,
                      with_fq=with_fq, with_tracer=with_tracer, vm_boot=vm_boot, root_sysctls=root_sysctls)
            run_dirs.append(run.dir)
            _record(opts.manifest, run.dir)
            try:
                run.execute()
            finally:
                leftovers = leftovers or not run.torn_down_cleanly
                if opts.ingest:
                    finalize_each([run.dir], console, ingest_failures)
    finally:
        try:
            topologies.close()
        except Exception as error:  # noqa: BLE001 - the journal must still be settled
            say(console, (f"teardown of the shared topology failed: {error}", "red"))
            leftovers = True
        if run_cgroup is not None:
            leftovers = not close_cgroup(run_cgroup, journal, console) or leftovers
        for key in rootsysctl.restore(root_sysctls, journal):
            console.print(f"[red]could not restore sysctl {key}={root_sysctls[key]['old']}[/]")
            leftovers = True
        if leftovers:
            # Keep the journal: `cctest clean` undoes what teardown could not.
            console.print("[red]teardown was incomplete (see meta.json warnings); run `cctest clean`[/]")
            journal.release()
        else:
            journal.finish()
    raise_for_ingest(ingest_failures)
    return made + run_dirs


def _prepare_host(specs: list[RunSpec], release: str, opts: RunOptions) -> tuple[bool, bool]:
    """The modules built and every run's parameters checked, before the first run; then whether fq
    and a tracer serve here: only what changes how a run is made (the full doctor costs seconds
    under emulation)."""
    from ..host.captures.tracer import choose_tracer

    if any(cc in kmod.PROJECT_CCS for spec in specs for cc in spec.modules) and not opts.in_vm:
        kmod.build(release)
    check_module_params(specs, release, opts.source)
    with_fq = doctor.probe_qdisc("fq")
    # a tracer for the per-packet captures: bpftrace, or tracefs where it cannot run (UML)
    return with_fq, choose_tracer(which("bpftrace") is not None) is not None


def enter_cgroup(journal: Journal, console: Console) -> cgroup.RunCgroup | None:
    """Move this process into the session's cgroup (journaled first), or say why there is none."""
    try:
        return cgroup.RunCgroup.enter(before_mkdir=journal.set_cgroup)
    except cgroup.CgroupError as error:
        journal.set_cgroup(None)
        console.print(f"[yellow]notice:[/] no cgroup for this run ({error}): after a SIGKILL, `cctest clean` "
                      "finds only the processes the journal names", highlight=False)
        return None


def close_cgroup(run_cgroup: cgroup.RunCgroup, journal: Journal, console: Console) -> bool:
    """Kill what is still in the session's cgroup and remove it. Whether that worked."""
    try:
        stray = run_cgroup.close()
    except (cgroup.CgroupError, OSError) as error:
        say(console, (f"could not remove the run's cgroup {run_cgroup.path}: {error}", "red"))
        return False
    journal.set_cgroup(None)
    if stray:
        console.print(f"[yellow]notice:[/] killed {stray} process(es) still in the run's cgroup after teardown",
                      highlight=False)
    return True


VM_MEMORY_GB = 2.5  # what one VM (-m 2G) costs the host, with qemu's own share


def vm_jobs(requested: int | None, clock: vm.VMClock, runs: int, console: Console) -> int:
    """How many VMs to run at once. On the virtual clock a VM's results do not depend on the host's
    load, so by default one per host core; on the wall clock VMs would steal each other's time."""
    if requested is None:
        requested = (os.cpu_count() or 1) if clock.kind == "virtual" else 1
    elif requested > 1 and clock.kind == "wall":
        console.print("[yellow]notice:[/] VMs in parallel on the wall clock compete for the host's CPUs "
                      "and slow each other's links; results may differ from -j 1")
    memory = _available_memory_gb()
    fit = max(1, int(memory // VM_MEMORY_GB)) if memory else requested
    if requested > fit:
        console.print(f"[yellow]notice:[/] {fit} VMs at most: {memory:.1f} GB of memory available")
    return max(1, min(requested, fit, runs))


def _available_memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def run_in_vm(specs: list[RunSpec], opts: RunOptions, console: Console) -> list[Path]:
    if any(c in str(opts.out.resolve()) for c in "=,"):
        # vng reads `--rwdir GUEST=HOST` and splits lists on commas: such a path shares the wrong place.
        raise BadInput(f"--out {opts.out}: with --vm the path may not contain '=' or ','")
    require_samplers()  # the guest runs this same Python environment
    guestplan.check_carried(specs)  # bad input before anything is built or booted
    clock = opts.clock or vm.VMClock.choose(None, None, opts.kvm)
    engine = engines.choose(opts.engine, opts.kernel, clock)
    if opts.engine == "auto":
        console.print(f"engine: {engine.name} (--engine auto: {engines.auto_reason(opts.kernel, clock)})",
                      highlight=False)
    release = engine.release()
    specs, made = _resumed(specs, opts, engine.meta(), None, console)
    if not specs:
        return made
    with contextlib.ExitStack() as held:
        if any(cc in kmod.PROJECT_CCS for spec in specs for cc in spec.modules):
            kdir, make_vars = engine.module_build()
            console.print(f"building modules for {release}" + (f" against {kdir}" if kdir else ""))
            # not rebuilt under the guests' feet
            held.enter_context(kmod.using_build(release, kdir=kdir, make_vars=make_vars))
            check_module_params(specs, release, opts.source)
        opts.out.mkdir(parents=True, exist_ok=True)
        held.enter_context(out_dir_lock(opts.out))
        return made + _boot_and_ingest(specs, opts, console, engine)


def _resumed(specs: list[RunSpec], opts: RunOptions, engine: dict, release: str | None,
             console: Console) -> tuple[list[RunSpec], list[Path]]:
    """With --resume: the runs still to make, and the directories of those --out holds made already
    (ingested now where the session that made them ended first). Imported here, on the host only:
    what a guest imports moves its runs' timing."""
    if not opts.resume:
        return specs, []
    from .resume import find_made

    made = find_made(specs, opts.out, engine, release)
    say(console, f"--resume: {len(made.dirs)} of {len(specs)} runs are in {opts.out} already (status ok, this "
                 f"commit, engine {engine.get('name')}); {len(specs) - len(made.dirs)} to run")
    failures: list[str] = []
    finalize_each(made.not_ingested(), console, failures)
    raise_for_ingest(failures)
    return made.remaining(specs), sorted(made.dirs.values())


@contextlib.contextmanager
def out_dir_lock(out: Path) -> Iterator[None]:
    """One --vm session per output directory: two would share its VM console logs and manifests'
    place, and a user who starts a sweep twice into one directory most likely did not mean to."""
    lock = filelock.open_lock(out.resolve() / ".cctest-vm.lock")
    try:
        filelock.take(lock, exclusive=True, block=False)
    except filelock.Busy as busy:
        lock.close()
        raise BadInput(f"--out {out}: another cctest --vm session ({busy}) is writing there; wait for it to "
                       "finish or choose another --out") from None
    try:
        yield
    finally:
        filelock.release(lock)


def _boot_and_ingest(specs: list[RunSpec], opts: RunOptions, console: Console, engine: engines.Engine) -> list[Path]:
    clock = opts.clock or vm.VMClock.choose(None, None, opts.kvm)
    out = opts.out.resolve()
    slots = vm_jobs(opts.jobs, clock, len(specs), console)
    parts = guest_parts(specs, slots, engine)
    vm.precompile_package()
    # a guest's kernel is seeded with its first run's seed (with one boot per run, its own)
    guests = [Guest(part, specs[part[0]].seed) for part in parts]
    console.print(f"booting {len(parts)} guest(s), {min(slots, len(parts))} at a time: {engine.describe()}")
    codes: list[int] = []
    crashes: dict[int, str] = {}
    started, cpu_before = time.monotonic(), children_cpu_s()
    try:
        # every VM's console goes to out/.vm-<k>.log (kept in its run directories), one VM or many
        codes = _run_pool(engine, specs, guests, opts, out, slots, console)
        _account(specs, parts, time.monotonic() - started, engine.name, slots, console,
                 children_cpu_s() - cpu_before)
    finally:
        run_dirs = []
        for k, guest in enumerate(guests):
            if guest.places is None:
                continue  # never booted
            mine = guest.run_dirs()
            run_dirs += mine
            guest.places.release()
            crash = keep_console(out / f".vm-{k}.log", mine)
            if crash and k < len(codes) and codes[k] != 0:
                crashes[k] = crash
            elif crash:
                console.print(f"notice: VM {k}'s kernel reported: {printable(crash)} (console in its run "
                              f"directories' {GUEST_CONSOLE})", highlight=False, markup=False)
        ingest_failures: list[str] = []
        if opts.ingest:
            finalize_each([d for d in run_dirs if (d / "meta.json").exists()], console, ingest_failures)
    if crashes:
        raise SessionError("the guest kernel crashed: " + "; ".join(
            f"{line} (VM {k}, console in {out / f'.vm-{k}.log'} and its run directories' {GUEST_CONSOLE})"
            for k, line in crashes.items()))
    failed = [(k, code) for k, code in enumerate(codes) if code != 0]
    if failed:
        raise SessionError("the run inside the VM exited with " + ", ".join(
            f"{code}" + (f" (VM {k}, console in {out / f'.vm-{k}.log'})" if len(guests) > 1 else "")
            for k, code in failed))
    raise_for_ingest(ingest_failures)
    return run_dirs


GUEST_CONSOLE = "guest-console.log"


@dataclass
class Guest:
    """One guest of a session: the runs it makes (indices into the selection), its kernel's seed,
    and once booted where it keeps its files and its process."""

    part: list[int]
    seed: int | None
    places: engines.Places | None = None
    proc: engines.Guest | None = None

    def run_dirs(self) -> list[Path]:
        """The run directories it has written, by their host paths."""
        assert self.places is not None
        return [self.places.to_host(line) for line in read_manifest(self.places.host_manifest)]


def guest_parts(specs: list[RunSpec], slots: int, engine: engines.Engine) -> list[list[int]]:
    """Which runs each guest makes. An engine that boots a guest per run gives every run a fresh
    kernel seeded with that run's own seed, so that -j, a shard or --only cannot change what a run
    measures; the dearest runs go first, so that the last ones to end are short. Otherwise (QEMU,
    whose boot costs tens of seconds and whose runs are not seeded) one guest per slot."""
    if not engine.boot_per_run:
        return split_for_vms(specs, slots)
    order = sorted(range(len(specs)), key=lambda i: (-estimated_wall_s(specs[i], vm=True, engine=engine.name), i))
    return [[i] for i in order]


def children_cpu_s() -> float:
    """CPU seconds of this process's ended children (and theirs): the guests', once each has ended."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _account(specs: list[RunSpec], parts: list[list[int]], wall_s: float, engine: str, slots: int,
             console: Console, cpu_s: float) -> None:
    """Print what the session cost beside the estimates, then log it for this host's next ones."""
    from ..emulation import hostcost  # the host's alone: an import more in a guest moves its clock

    factor = hostcost.host_factor(engine)
    console.print(cost_line(specs, parts, wall_s, engine, slots, factor, cpu_s), highlight=False)
    guest_s = sum(specs[i].scenario.duration_s for part in parts for i in part)
    hostcost.remember(engine, wall_s, session_estimate(specs, parts, engine, slots), guest_s,
                      max(1, min(slots, len(parts))), cpu_s)


def session_estimate(specs: list[RunSpec], parts: list[list[int]], engine: str, slots: int) -> float:
    """The cost model's wall time for the session: the guests start in order, each on the slot that
    frees first."""
    loads = [0.0] * max(1, min(slots, len(parts)))
    for part in parts:
        loads[loads.index(min(loads))] += sum(estimated_wall_s(specs[i], vm=True, engine=engine) for i in part)
    return max(loads)


def cost_line(specs: list[RunSpec], parts: list[list[int]], wall_s: float, engine: str, slots: int,
              factor: HostFactor | None = None, cpu_s: float | None = None) -> str:
    """What the session cost, beside what the cost model `cctest list` uses had estimated (and, where
    this host has run sessions before, the model scaled by them), so that a user can check the
    estimate: host seconds per guest second of the flows, per VM slot; with `cpu_s` (the guests' CPU
    time), whether they had their CPUs to themselves."""
    from ..emulation.hostcost import QUIET_SHARE, cpu_share

    slots = max(1, min(slots, len(parts)))
    guest_s = sum(specs[i].scenario.duration_s for part in parts for i in part)
    estimate = session_estimate(specs, parts, engine, slots)
    per_guest_s = wall_s * slots / guest_s if guest_s else 0.0
    scaled = f"; {estimate * factor.ratio:.0f} scaled {factor.describe()}" if factor else ""
    line = (f"cost: {wall_s:.0f} host s for {guest_s:.0f} guest s of flows in {len(parts)} {engine} VM(s), "
            f"{slots} at a time, {per_guest_s:.2f} host s per guest s per VM (estimated {estimate:.0f} host s"
            f"{scaled})")
    if cpu_s is None:
        return line
    share = cpu_share(cpu_s, wall_s, slots)
    line += f"; the guests were on CPU {share:.0%} of the time"
    if share < QUIET_SHARE:
        line += ": other work ran beside them, so this host's later estimates leave this session out"
    return line


def write_guest_plan(specs: list[RunSpec], part: list[int], opts: RunOptions, places: engines.Places) -> None:
    """The guest's plan file: the runs at `part` (indices into the selection) as the host made
    them, and where the guest writes and lists them, in its own names."""
    guestplan.write(places.host_plan, [specs[i] for i in part], names=opts.names, out=places.out,
                    manifest=places.manifest, facts=host_facts())


def guest_command(places: engines.Places) -> list[str]:
    """What a guest runs: its plan file, read by the hidden `cctest guest-run`. No experiments file,
    no selection: the plan holds exactly the runs the host chose for it."""
    return [places.python, *places.python_flags, "-m", "cctest", "guest-run", places.plan]


def keep_console(log: Path, run_dirs: list[Path]) -> str | None:
    """Copy a VM's console (the guest kernel's messages included) into each run directory it wrote;
    return the line naming a guest kernel crash in it, if any."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    for run_dir in run_dirs:
        if run_dir.is_dir():
            (run_dir / GUEST_CONSOLE).write_text(text)
    return vm.guest_crash(text)


def read_manifest(manifest: Path) -> list[str]:
    """The run directories a VM wrote, one per line as the guest names them (a path may hold spaces)."""
    if not manifest.exists():
        return []
    return [line for line in manifest.read_text().splitlines() if line.strip()]


POOL_POLL_S = 2.0


def _run_pool(engine: engines.Engine, specs: list[RunSpec], guests: list[Guest], opts: RunOptions, out: Path,
              slots: int, console: Console) -> list[int]:
    """Boot the guests in order, at most `slots` at a time, each pinned to a slot's CPU and with its
    console in out/.vm-<k>.log; say which run each is on as its manifest grows. On an interrupt the
    running guests are asked to stop (they keep what they measured) and the rest never boot."""
    waiting = list(range(len(guests)))
    running: dict[int, int] = {}  # guest -> slot
    seen = [0] * len(guests)
    try:
        while waiting or running:
            free = [slot for slot in range(slots) if slot not in running.values()]
            while waiting and free:
                k, slot = waiting.pop(0), free.pop(0)
                guest = guests[k]
                guest.places = engine.places(out, k)
                write_guest_plan(specs, guest.part, opts, guest.places)
                guest.proc = engine.start(guest_command(guest.places), guest.places, k, out / f".vm-{k}.log",
                                          seed=guest.seed, slot=slot)
                running[k] = slot
            for k in list(running):
                guest = guests[k]
                assert guest.places is not None and guest.proc is not None
                lines = read_manifest(guest.places.host_manifest)
                for n, line in enumerate(lines[seen[k]:], start=seen[k] + 1):
                    say(console, f"VM {k}: run {n}/{len(guest.part)} {Path(line).parent.name}/{Path(line).name}")
                seen[k] = len(lines)
                if guest.proc.poll() is not None:
                    del running[k]
                    say(console, f"VM {k}: exit {guest.proc.returncode} (console: {out / f'.vm-{k}.log'})")
            if waiting or running:
                time.sleep(POOL_POLL_S)
    except BaseException:
        engine.stop_all([guest.proc for guest in guests if guest.proc is not None])
        raise
    procs = [guest.proc for guest in guests if guest.proc is not None]
    _say_problems(engine, procs, console)
    return [proc.returncode if proc.returncode is not None else 1 for proc in procs]


def _say_problems(engine: engines.Engine, guests: list, console: Console) -> None:
    for problem in engine.problems(guests):
        say(console, ("warning:", "red"), f" {problem}")
