"""The `cctest` command line: parse, call, print. Errors reach the user through errors.Group: one
line and the exit code their class carries (2 bad input, 1 a failed run, 3 failed claims).

Imports of anything heavy (pydantic, pandas, plotly, the scenario models) happen inside the
commands that need them, so `cctest --help` and shell completion start in a fraction of a second
(bench/cli_help.py measures it)."""

from __future__ import annotations

import contextlib
import errno
import platform
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from .. import __version__
from ..analysis.defaults import DEFAULT_SKIP_S
from ..base import errors
from ..base.errors import BadInput, CctestError
from ..base.limits import MAX_RUNS
from .completion import complete_scenarios, complete_tags
from .report import check_command, report_command
from .validate import validate_command

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from rich.console import Console

    from ..emulation.hostcost import HostFactor
    from ..emulation.vm import VMClock
    from ..model.plan import RunSpec
    from ..model.scenario import Experiments, Link, Scenario
    from ..run.session import RunOptions

DEFAULT_EXPERIMENTS = "experiments.yaml"


class _LazyConsole:
    """rich's Console, made on first use: importing rich costs a tenth of a second of every --help."""

    _console: Console | None

    def __init__(self, **kw: Any) -> None:
        self._kw, self._console = kw, None

    def _real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._kw)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    # special methods are looked up on the type, never through __getattr__: a live Progress enters
    # its console as a context manager
    def __enter__(self) -> Console:
        return self._real().__enter__()

    def __exit__(self, *exc: *tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        return self._real().__exit__(*exc)


# a Console in all but when it is made
console = cast("Console", _LazyConsole())
err_console = cast("Console", _LazyConsole(stderr=True))


def load_experiments(path: str) -> Experiments:
    from ..model.scenario import load_experiments as load

    return load(path)


experiments_option = click.option("-f", "--file", "experiments_file", default=DEFAULT_EXPERIMENTS, show_default=True,
                                  type=click.Path(dir_okay=False), help="the experiments file")
json_option = click.option("--json", "as_json", is_flag=True, help="print JSON on stdout instead of a table")


def print_json(data: object) -> None:
    from ..base.jsonsafe import dumps

    click.echo(dumps(data, indent=1, default=str))


@click.group(cls=errors.Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)
def main() -> None:
    """Experiment-as-code for TCP congestion-control research.

    Shell completion (scenario names and tags too): add
    `eval "$(_CCTEST_COMPLETE=bash_source cctest)"` to ~/.bashrc (zsh_source, fish_source for
    those shells).
    """


force_option = click.option("--force", is_flag=True, help=f"allow more than {MAX_RUNS} runs in one invocation")


def _duration(seconds: float) -> str:
    if seconds < 30:  # under half a minute "0 min" would say nothing
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def vm_engine() -> str:
    """The engine a plain `--vm` would boot here (uml where its kernel is built), for the estimates."""
    from ..emulation import engines, vm

    return engines.resolve("auto", None, vm.VMClock())


def host_scale(engine: str) -> HostFactor | None:
    """How this host's past sessions on `engine` scale the cost model (None: it has run none)."""
    from ..emulation import hostcost

    return hostcost.host_factor(engine)


def scenario_plan(experiments: Experiments, name: str, force: bool, cores: int, engine: str,
                  scale: HostFactor | None = None) -> dict:
    """One scenario as `list --json` and `show` give it: link, flows, matrix, claims, runs and the
    estimated wall time natively and with --vm on `cores` single-vCPU VMs of `engine` (the cost model
    times this host's `scale`, a hostcost.HostFactor, where it has one)."""
    from ..kernel.modsource import check_declared_params
    from ..model.plan import estimated_wall_s, expand

    scenario = experiments.scenarios[name]
    specs = expand(experiments, name, force=force)
    check_declared_params(specs, experiments.file_of(name))  # what insmod would refuse, before anything is built
    native = sum(estimated_wall_s(spec, vm=False) for spec in specs)
    in_vm = sum(estimated_wall_s(spec, vm=True, engine=engine) for spec in specs) / min(cores, len(specs))
    in_vm *= scale.ratio if scale else 1.0
    return {
        "name": name, "description": scenario.description, "tags": list(scenario.tags),
        "link": scenario.link.model_dump(mode="json"), "flows": [f.model_dump(mode="json") for f in scenario.flows],
        "duration_s": scenario.duration_s, "repetitions": scenario.repetitions, "seed": scenario.seed,
        "matrix": scenario.matrix,
        "claims": [e.model_dump(mode="json") for e in scenario.expect],
        "runs": [{"label": spec.label, "matrix": spec.matrix, "repetition": spec.repetition, "seed": spec.seed}
                 for spec in specs],
        "estimate_s": {"native": native, "vm": in_vm, "vm_jobs": cores, "vm_engine": engine,
                       "vm_host_scale": scale.ratio if scale else None},
        "_specs": specs,
    }


def _bottleneck_text(link: Link) -> str:
    buffer = f"{link.buffer_bdp:g} BDP" if link.buffer_bdp is not None else f"{link.buffer_bytes} B"
    out = f"{link.rate_mbps:g} Mbit/s, {link.rtt_ms:g} ms, {buffer}"
    if link.aqm != "fifo":
        out += f", {link.aqm}" + (" + ECN" if link.ecn else "")
    if link.loss_pct:
        out += f", loss {link.loss_pct:g}%"
    if link.rate_schedule:
        out += ", rate " + " → ".join(f"{s.rate_mbps:g}@{s.at_s:g}s" for s in link.rate_schedule)
    out += "".join(f", outage {o.at_s:g}-{o.at_s + o.duration_s:g} s" for o in link.outages)
    return out


def _flows_text(scenario: Scenario) -> str:
    return ", ".join(
        f"{f.count}x{f.cc}" + (f"@{f.rtt_ms:g}ms" if f.rtt_ms else "") + (f"+{f.start_s:g}s" if f.start_s else "")
        for f in scenario.flows)


def _matrix_text(matrix: dict) -> str:
    return "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in matrix.items())


@main.command("list")
@experiments_option
@click.option("--tag", "tags", multiple=True, shell_complete=complete_tags,
              help="only scenarios with this tag (repeatable: any of them)")
@force_option
@json_option
def list_scenarios(experiments_file: str, tags: tuple[str, ...], force: bool, as_json: bool) -> None:
    """Show the scenarios, what each sweeps, their claims and estimated wall time (every matrix
    variant is validated as `run` does). `cctest show NAME` gives one scenario in full."""
    from rich.table import Table

    experiments = load_experiments(experiments_file)
    names = tagged(experiments, experiments_file, tags) if tags else list(experiments.scenarios)
    cores, engine = _cores(), vm_engine()
    scale = host_scale(engine)
    plans = [scenario_plan(experiments, name, force, cores, engine, scale) for name in dict.fromkeys(names)]
    if as_json:
        print_json([{k: v for k, v in p.items() if not k.startswith("_")} for p in plans])
        return
    table = Table("scenario", "tags", "bottleneck", "flows", "matrix", "runs", "claims", "native", f"--vm -j{cores}",
                  caption=f"native, --vm: estimated wall time (the VM's on the {engine} engine --vm would use here, "
                          f"from its cost model{_scaled(scale)}, {cores} single-vCPU VMs in parallel)",
                  caption_justify="left")
    table.columns[0].no_wrap = True
    totals = [0, 0.0, 0.0]
    for p in plans:
        scenario = experiments.scenarios[p["name"]]
        totals = [totals[0] + len(p["runs"]), totals[1] + p["estimate_s"]["native"], totals[2] + p["estimate_s"]["vm"]]
        table.add_row(*_cells(p["name"], ", ".join(scenario.tags), _bottleneck_text(scenario.link),
                              f"{_flows_text(scenario)}; {scenario.duration_s:g} s", _matrix_text(scenario.matrix),
                              str(len(p["runs"])), str(len(scenario.expect) or ""),
                              _duration(p["estimate_s"]["native"]), _duration(p["estimate_s"]["vm"])))
    if len(plans) > 1:
        table.add_row("all", "", "", "", "", str(totals[0]), "", _duration(totals[1]), _duration(totals[2]))
    _wide_console().print(table)


def _scaled(scale: HostFactor | None) -> str:
    return f" scaled {scale.describe()}" if scale else ""


def _cells(*texts: str) -> list:
    """Table cells from the file's text: shown as written, never read as markup."""
    from rich.text import Text

    return [Text(errors.printable(text, limit=None)) for text in texts]


def _wide_console() -> Console:
    """The console, or in a pipe one wide enough that no cell is cut at 80 columns."""
    if console.is_terminal:
        return console
    from rich.console import Console

    return Console(width=400, no_color=True)


@main.command("show")
@click.argument("name", shell_complete=complete_scenarios)
@experiments_option
@force_option
@json_option
def show(name: str, experiments_file: str, force: bool, as_json: bool) -> None:
    """Show scenario NAME in full: its bottleneck and flows, every run its matrix expands to, its
    claims and the estimated wall time."""
    experiments = load_experiments(experiments_file)
    experiments.get(name)  # an unknown name is bad input, with the closest names
    engine = vm_engine()
    scale = host_scale(engine)
    p = scenario_plan(experiments, name, force, _cores(), engine, scale)
    if as_json:
        print_json({k: v for k, v in p.items() if not k.startswith("_")})
        return
    scenario = experiments.scenarios[name]
    lines = [f" — {scenario.description}" if scenario.description else "",
             f"tags: {', '.join(scenario.tags) or '(none)'}",
             f"bottleneck: {_bottleneck_text(scenario.link)}",
             f"flows: {_flows_text(scenario)}; {scenario.duration_s:g} s, seed {scenario.seed}, "
             f"{scenario.repetitions} repetition(s)"]
    for step in scenario.flows:
        if step.params:
            lines.append(f"  {step.cc} parameters: " + ", ".join(f"{k}={v}" for k, v in step.params.items()))
    lines.append(f"matrix: {_matrix_text(scenario.matrix) or '(none)'}")
    lines.append(f"runs ({len(p['runs'])}):")
    lines += [f"  {r['label']} r{r['repetition']}" for r in p["runs"]]
    lines.append(f"claims ({len(scenario.expect)}):" if scenario.expect else "claims: (none)")
    for e in scenario.expect:
        where = f" where {e.where}" if e.where else ""
        lines.append(f"  {e.claim}{where}" + (f"  [{e.source}]" if e.source else "")
                     + (f" — {e.note}" if e.note else ""))
    est = p["estimate_s"]
    lines.append(f"estimated wall time: {_duration(est['native'])} native, {_duration(est['vm'])} with --vm "
                 f"on {est['vm_jobs']} single-vCPU {est['vm_engine']} VMs (cost model{_scaled(scale)})")
    # names, descriptions, claims and notes are the file's text: never markup, never an escape
    errors.say(console, (name, "bold"), lines[0], limit=None)
    for line in lines[1:]:
        errors.say(console, line, limit=None)


def tagged(experiments: Experiments, experiments_file: str, tags: tuple[str, ...]) -> list[str]:
    """Scenarios carrying any of `tags`, in file order; a tag nothing carries is bad input."""
    names = []
    for tag in tags:
        mine = [name for name, s in experiments.scenarios.items() if tag in s.tags]
        if not mine:
            known = sorted({t for s in experiments.scenarios.values() for t in s.tags})
            raise BadInput(f"{experiments_file}: no scenario tagged {tag}; tags: {', '.join(known) or '(none)'}")
        names += mine
    return names


def parse_shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = re.fullmatch(r"(\d{1,18})/(\d{1,18})", value.strip())  # bounded: int() of 5 000 digits is an error
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise BadInput(f"--shard {value}: give i/N with 1 <= i <= N < 10**18, e.g. 2/4")
    return int(match[1]), int(match[2])


@main.command()
@click.argument("scenarios", nargs=-1, shell_complete=complete_scenarios)
@experiments_option
@click.option("--tag", "tags", multiple=True, shell_complete=complete_tags,
              help="also run every scenario with this tag (repeatable)")
@click.option("--repetitions", "-n", type=click.IntRange(min=1), help="override the scenario's repetitions")
@click.option("--first-repetition", type=click.IntRange(min=0, max=2**64 - 1), default=0, show_default=True,
              metavar="K",
              help="number the repetitions (and their seeds) from K: adds to a set already run, e.g. -n 3 "
                   "--first-repetition 3 makes r3-r5")
@click.option("--only", "only_points", multiple=True, metavar="KEY=VALUE",
              help="run only the matrix points where matrix key KEY has VALUE (repeatable: values of one key "
                   "are alternatives, every key given must match)")
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="where run directories go")
@click.option("--vm", "mode", flag_value="vm", help="run inside a virtme-ng VM on a stock kernel")
@click.option("--native", "mode", flag_value="native", help="run on this host's kernel")
@click.option("--engine", type=click.Choice(["auto", "qemu", "uml"]), default="auto", show_default=True,
              help="--vm's emulator: uml (this project's User-Mode Linux build in time-travel mode: 3-5x cheaper, "
                   "not the stock kernel; docs/uml.md), qemu (a stock distro kernel on QEMU's instruction counter), "
                   "or auto: uml where its kernel is built (scripts/uml-kernel.sh), else qemu")
@click.option("--kernel", type=click.Path(),
              help="kernel image for --vm (default: the one linux-image-amd64 points to, else the newest "
                   "/boot/vmlinuz-*)")
@click.option("--kvm", is_flag=True, help="use KVM for --vm instead of software emulation (wall clock)")
@click.option("--clock", type=click.Choice(["virtual", "wall"]), default=None,
              help="--vm's clock: virtual (QEMU's instruction counter: faithful whatever the host's speed; the "
                   "default) or wall (the host's; the default with --kvm)")
@click.option("--icount-shift", type=int, default=None,
              help="virtual clock: 2**N ns of guest time per instruction (0-10, default 0: the fastest guest CPU)")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="--vm: VMs in parallel, one vCPU each (default: the host's cores on the virtual clock, 1 on the "
                   "wall clock)")
@click.option("--shard", metavar="i/N",
              help="run only shard i of N (a stable split of this invocation's runs; with --dry-run, shows which)")
@click.option("--resume", is_flag=True,
              help="skip the runs --out already holds, made by this commit on the same engine (status ok, same "
                   "scenario, point, repetition and seed): a cut campaign goes on where it stopped")
@click.option("--dry-run", is_flag=True, help="print topology, commands and flow schedule; change nothing")
@click.option("--json", "as_json", is_flag=True, help="with --dry-run: the runs as JSON on stdout")
@force_option
def run(scenarios: Sequence[str], experiments_file: str, tags: tuple[str, ...], repetitions: int | None,
        first_repetition: int, only_points: tuple[str, ...], out: str, mode: str | None, engine: str,
        kernel: str | None, kvm: bool, clock: str | None, icount_shift: int | None, jobs: int | None,
        shard: str | None, resume: bool, dry_run: bool, as_json: bool, force: bool) -> None:
    """Run SCENARIOS for real and write one run directory per run."""
    from ..model.plan import check_point_filter, in_points
    from ..run.session import RunOptions

    experiments = load_experiments(experiments_file)
    # named scenarios as given (twice is twice), then the tagged ones not named already
    scenarios = [*scenarios, *(name for name in dict.fromkeys(tagged(experiments, experiments_file, tags))
                               if name not in scenarios)]
    points = parse_points(only_points)
    check_point_filter(experiments, scenarios, points)
    planned = _planned_runs(experiments, experiments_file, scenarios, repetitions, force, first_repetition)
    vm_clock = _vm_clock(mode, engine, kernel, kvm, clock, icount_shift)
    kept = [i for i, spec in enumerate(planned) if in_points(spec, points)]
    specs = [planned[i] for i in _sharded(planned, kept, shard, quiet=dry_run and as_json)]
    if not specs:
        return
    if as_json and not dry_run:
        raise BadInput("--json goes with --dry-run (a real run prints its progress)")
    if resume and dry_run:
        raise BadInput("--resume is decided as the runs start, on the engine they run on; --dry-run lists every "
                       "planned run (drop one of the two)")
    if dry_run:
        _print_dry_run(specs, vm_clock, as_json)
        return
    opts = RunOptions(source=Path(experiments_file), names=list(scenarios), out=Path(out), mode=mode or "auto",
                      kernel=kernel, kvm=kvm, clock=vm_clock, jobs=jobs, engine=engine, resume=resume)
    _execute(specs, opts)


@main.command("guest-run", hidden=True)
@click.argument("plan_file", type=click.Path(path_type=Path))
def guest_run(plan_file: Path) -> None:
    """Inside a --vm guest: make the runs the host wrote into PLAN_FILE, natively, listing each run
    directory in the plan's manifest; the host makes their tables. A plan this code cannot read is
    bad input, before anything is set up."""
    from ..host.rundir import take_host_facts
    from ..model import guestplan
    from ..run.session import RunOptions, run_native

    plan = guestplan.read(plan_file)
    take_host_facts(plan.facts)
    opts = RunOptions(source=plan_file, names=plan.names, out=Path(plan.out), mode="native", kernel=None, kvm=False,
                      ingest=False, in_vm=True, manifest=Path(plan.manifest))
    _run_and_list(lambda: run_native(plan.runs, opts, console))


def parse_points(given: tuple[str, ...]) -> dict[str, list]:
    """--only KEY=VALUE options -> key: the values kept (read as YAML scalars, as the matrix is)."""
    from ..base.safeload import Refused, load_yaml

    points: dict[str, list] = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise BadInput(f"--only {item}: give KEY=VALUE with KEY a matrix key, e.g. --only buffer_bdp=5")
        try:
            parsed = load_yaml(value)
        except Refused as error:
            raise BadInput(f"--only {item}: {error}") from None
        if isinstance(parsed, (dict, list)) or parsed is None:
            raise BadInput(f"--only {item}: VALUE must be one number or word, as the matrix lists it")
        points.setdefault(key.strip(), []).append(parsed)
    return points


def _planned_runs(experiments: Experiments, experiments_file: str, scenarios: list[str], repetitions: int | None,
                  force: bool, first_repetition: int = 0) -> list[RunSpec]:
    """Every run the scenarios expand to, checked before anything is built: their number (at most
    MAX_RUNS without --force) and the module parameters insmod would refuse."""
    from ..kernel.modsource import check_declared_params
    from ..model.plan import expand, run_count

    if not scenarios:
        raise BadInput("name at least one scenario, or --tag (cctest list shows both)")
    total = sum(run_count(experiments, name, repetitions) for name in scenarios)
    if total > MAX_RUNS and not force:
        raise BadInput(f"{experiments_file}: {' '.join(scenarios)}: {total} runs in one invocation; at most "
                       f"{MAX_RUNS} without --force")
    specs = [spec for name in scenarios
             for spec in expand(experiments, name, repetitions, force=force, first_repetition=first_repetition)]
    check_declared_params(specs, experiments_file)
    return specs


def _vm_clock(mode: str | None, engine: str, kernel: str | None, kvm: bool, clock: str | None,
              icount_shift: int | None) -> VMClock:
    """--vm's clock, once the VM options were found to work together (bad input before anything is set up)."""
    from ..emulation import vm

    vm_clock = vm.VMClock.choose(clock, icount_shift, kvm)
    if kernel and engine != "uml":
        vm.pick_kernel(kernel)  # a path that is no kernel image is bad input
    if engine == "uml" and mode != "vm":
        raise BadInput(f"--engine {engine} is for --vm runs; add --vm")
    return vm_clock


def _sharded(specs: list, kept: list[int], shard_option: str | None, quiet: bool) -> list[int]:
    """Indices into the whole plan `specs` of the runs this invocation makes: those `kept` by --only,
    then one shard, which is named unless `quiet` (its JSON is the output)."""
    shard = parse_shard(shard_option)
    if not shard:
        return kept
    from ..model.plan import shard as shard_of

    mine = [kept[i] for i in shard_of([specs[i] for i in kept], *shard)]
    if not quiet:
        click.echo(f"shard {shard[0]}/{shard[1]}: {len(mine)} of {len(kept)} runs"
                   + "".join(f"\n  {specs[i].scenario.name} {specs[i].label} r{specs[i].repetition}" for i in mine))
    return mine


def _print_dry_run(specs: list[RunSpec], vm_clock: VMClock, as_json: bool) -> None:
    from ..model import dumbbell

    if as_json:
        engine = vm_engine()
        scale = host_scale(engine)
        print_json([dry_run_json(spec, vm_clock, engine, scale.ratio if scale else 1.0) for spec in specs])
        return
    for spec in specs:
        click.echo(dumbbell.describe(spec))


def _execute(specs: list[RunSpec], opts: RunOptions) -> None:
    """The runs, natively or in VMs."""
    from ..run.session import choose_mode, run_in_vm, run_native

    def make_runs() -> list[Path]:
        chosen = choose_mode(opts.mode, specs, console)
        if chosen == "native" and (opts.jobs or 1) > 1:
            console.print("[yellow]notice:[/] -j spreads runs over VMs; native runs go one at a time")
        return (run_in_vm if chosen == "vm" else run_native)(specs, opts, console)

    _run_and_list(make_runs)


def _run_and_list(make_runs: Callable[[], list[Path]]) -> None:
    """Make the runs and name their run directories. A cctest error reaches the user as its one line
    and exit code (errors.Group); Ctrl-C, once torn down, exits 130; a full disk (not a bug: a long
    campaign's captures fill it) says so in one line and exits 1; anything else is a bug and keeps
    its traceback."""
    try:
        # SIGTERM (a batch scheduler's or a script's stop) tears the guests down as Ctrl-C does
        with interruptible("torn down; what was measured is kept"):
            run_dirs = make_runs()
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        where = f" writing {error.filename}" if error.filename else ""
        errors.say(err_console, f"no space left on device{where}: torn down; the run directories written before "
                   "it are kept; free space, then run the missing runs (--only, -n with --first-repetition)")
        sys.exit(errors.FAILED)
    for run_dir in run_dirs:
        errors.say(console, f"run directory: {run_dir}")


def dry_run_json(spec: RunSpec, vm_clock: VMClock, engine: str, scale: float = 1.0) -> dict:
    """One planned run as `run --dry-run --json` prints it: what it runs, on which link, its seed and
    the estimated wall time (with --vm on `engine`: the cost model times this host's `scale`)."""
    import dataclasses

    from ..model import dumbbell
    from ..model.plan import estimated_wall_s

    return {"scenario": spec.scenario.name, "label": spec.label, "matrix": spec.matrix,
            "repetition": spec.repetition, "seed": spec.seed, "duration_s": spec.scenario.duration_s,
            "link": dataclasses.asdict(spec.link), "flows": [dataclasses.asdict(f) for f in spec.flows],
            "modules": spec.modules, "vm_clock": {"kind": vm_clock.kind, "icount_shift": vm_clock.shift,
                                                  "kvm": vm_clock.kvm},
            "estimate_s": {"native": estimated_wall_s(spec, vm=False),
                           "vm": estimated_wall_s(spec, vm=True, engine=engine) * scale},
            "plan": dumbbell.describe(spec)}


@main.command("doctor")
@json_option
@click.pass_context
def doctor_command(ctx: click.Context, as_json: bool) -> None:
    """Check what this host can do and say where runs will happen. Exits 1 when no mode can run."""
    import dataclasses

    from ..run import doctor

    results = doctor.checks()
    verdict = doctor.verdict(results)
    mode = verdict.split(":", 1)[0]  # native | vm | none
    if as_json:
        print_json({"mode": mode, "verdict": verdict, "checks": [dataclasses.asdict(c) for c in results],
                    "vm_clock": doctor.vm_clock_verdict(results) if mode == "native" else None})
    else:
        from rich.table import Table

        table = Table("capability", "status", "detail", "needed for", "fix")
        for check in results:
            table.add_row(check.name, "[green]ok[/]" if check.ok else "[red]missing[/]", check.detail,
                          check.needed_for, "" if check.ok else check.fix)
        console.print(table)
        console.print(f"[bold]mode:[/] {verdict}")
        if mode == "native":
            console.print(f"[bold]with --vm:[/] {doctor.vm_clock_verdict(results)}")
    if mode == "none":
        ctx.exit(errors.FAILED)


@main.command()
@click.option("--force", is_flag=True,
              help="clean even while a run holds the lock, and also remove cc* links, Mininet host shells and "
                   "modules the journal does not name or cannot vouch for")
def clean(force: bool) -> None:
    """Remove what a run killed with SIGKILL left behind, as its journal names it (the run's cgroup with
    every process in it, links, host shells, processes, a tracefs mount, modules, sysctls). An entry
    cctest could not have written is refused, one line each, exit 2."""
    from ..run import cleanup

    actions = cleanup.clean(force=force)
    for line in actions:
        # one line each, paths unbroken; a journal's text is never markup or terminal control
        errors.say(console, line)
    if not actions:
        console.print("nothing to clean" + ("" if force else ": no journal of a killed run (--force also removes "
                                                              "anything that looks like a cctest run's)"))
    if any(line.startswith("refused ") for line in actions):
        sys.exit(errors.BAD_INPUT)  # the journal names what cctest could not have written


@main.group()
def modules() -> None:
    """Build, load, unload and list this project's congestion-control modules."""


release_option = click.option("--kernel-release", "-r", default=platform.release, show_default="running kernel",
                              help="kernel release to build for")


@modules.command("build")
@release_option
def modules_build(kernel_release: str) -> None:
    """Build every module for a kernel release (rebuilt only when a source changed)."""
    from ..kernel import kmod

    built = kmod.build(kernel_release, verbose=True)
    for name, path in sorted(built.items()):
        console.print(f"{name}: {path}")


@modules.command("list")
@release_option
def modules_list(kernel_release: str) -> None:
    """Show each module: where it is built, whether it is loaded, its parameters."""
    from rich.table import Table

    from ..kernel import kmod

    built = kmod.built_modules(kernel_release)
    available = kmod.available_ccs()
    table = Table("cc", "built for " + kernel_release, "loaded", "parameters")
    for cc in kmod.PROJECT_CCS:
        ko = built.get(cc)
        params = ", ".join(kmod.module_parameters(ko)) if ko else ""
        table.add_row(cc, str(ko) if ko else "-", "yes" if cc in available else "no", params)
    console.print(table)


@modules.command("load")
@click.argument("name")
@click.argument("params", nargs=-1)
@release_option
def modules_load(name: str, params: tuple[str, ...], kernel_release: str) -> None:
    """Load NAME with optional key=value module parameters."""
    from ..kernel import kmod

    try:
        parsed = {k: int(v) for k, v in (p.split("=", 1) for p in params)}
    except ValueError:
        raise BadInput(f"modules load {name} {' '.join(params)}: parameters are key=integer, e.g. x=1") from None
    loaded = kmod.load(name, parsed, kernel_release)
    console.print(f"{name} available; parameters {loaded.effective_params}")


@modules.command("unload")
@click.argument("name")
def modules_unload(name: str) -> None:
    """Unload NAME (a project module, or a kernel cc's tcp_NAME module)."""
    from ..kernel import kmod

    kmod.unload(kmod.module_name(name))
    console.print(f"{name} unloaded")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
def ingest(run_dirs: tuple[str, ...]) -> None:
    """(Re)make the tidy tables and health verdict of run directories from their raw captures (a
    compact one, without raw/, keeps its tables and has its health judged again)."""
    from ..run.session import finalize_each

    refuse_unknown_versions([Path(run_dir) for run_dir in run_dirs])
    failures: list[str] = []
    code = finalize_each([Path(run_dir) for run_dir in run_dirs], console, failures)
    if failures:
        error_class = BadInput if code == errors.BAD_INPUT else CctestError
        raise error_class(f"ingest failed for {len(failures)} of {len(run_dirs)} run(s); the first: {failures[0]}")


def refuse_unknown_versions(run_dirs: list[Path]) -> None:
    """Bad input before any run directory is touched: a meta.json of a format this code does not
    read (one that is no JSON at all fails in its own run's ingest, as before)."""
    from ..analysis.ingest import read_meta
    from ..model.record import check_version

    for run_dir in run_dirs:
        try:
            meta = read_meta(run_dir)
        except (OSError, ValueError, CctestError):
            continue
        check_version(meta, run_dir / "meta.json")


@main.command("record")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--skip-s", type=click.FloatRange(min=0), default=DEFAULT_SKIP_S, show_default=True,
              help="Steady state starts this many seconds after time zero (what check and report use).")
def record(src: Path, dest: Path, skip_s: float) -> None:
    """Write the compact record of every run directory under SRC into DEST, at the run's path below
    SRC (DEST/<path>/record.json, a few kB: meta.json, scenario, health and the metrics claims and
    tables read). `check`, `report` and `validate` read a tree of records as they read run
    directories; the figures of time series need the run directories themselves."""
    from ..analysis import records

    planned = records.plan(src, dest, skip_s)  # every run measured before the first record is written
    size = records.write(planned)
    click.echo(f"wrote {len(planned)} record(s) into {dest} ({size / 1e3:.0f} kB)")


@contextlib.contextmanager
def interruptible(kept: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM: what is being written is removed as it unwinds, then one line saying
    what is `kept`, and exit 130. A SIGTERM after the first is ignored: it would cut the unwinding
    short (a guest left running, a file half removed)."""
    import signal

    def as_interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, as_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        click.echo(f"interrupted: {kept}", err=True)
        sys.exit(errors.INTERRUPTED)
    finally:
        signal.signal(signal.SIGTERM, previous)


@main.command("archive")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--base-url", metavar="URL", help="where the archives will be published (https://..., file:///...), "
              "recorded in the manifest; without it `fetch` looks beside the manifest")
def archive(src: Path, dest: Path, base_url: str | None) -> None:
    """Pack every run directory under SRC into DEST, one archive each (the same bytes each time a run
    is packed), and write DEST/manifest.json: per run its scenario, run id, archive, size and sha256,
    and every file's sha256. Publish the archives at the base URL; `cctest fetch` downloads and
    checks them."""
    from ..analysis import archive as packing
    from ..analysis.fetch import shown_size
    from ..model.archive import MANIFEST_FILE

    planned = packing.plan(src, dest, base_url)  # every run read and every output checked first
    with interruptible("the archives written are whole; no manifest was written"):
        manifest = packing.write(planned, dest, base_url)
    size = sum(run.size for run in manifest.runs)
    click.echo(f"archived {len(manifest.runs)} run(s) into {dest} ({shown_size(size)}); their manifest: "
               f"{dest / MANIFEST_FILE}")


@main.command("fetch")
@click.argument("manifest", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--only", multiple=True, metavar="SCENARIO|RUN_ID",
              help="only the runs of this scenario, run id or scenario/run_id (repeatable)")
@click.option("--base-url", metavar="URL", help="download from here instead of the manifest's base URL (a mirror)")
def fetch(manifest: Path, dest: Path, only: tuple[str, ...], base_url: str | None) -> None:
    """Download the runs MANIFEST lists (`cctest archive` wrote it), check each archive's sha256 and
    every file's against it, and unpack each run into DEST/<scenario>/<run_id>/, whole or not at
    all. A run already there with every file as listed is skipped; a difference is refused (exit 2)."""
    from ..analysis import fetch as fetching

    with interruptible("the runs fetched so far are kept, nothing of the run being fetched"):
        done = fetching.fetch(manifest, dest, only, base_url, say=click.echo)
    click.echo(f"fetched {done.fetched} run(s) into {dest} ({fetching.shown_size(done.bytes)}); {done.present} "
               "already there")


main.add_command(report_command)
main.add_command(check_command)
main.add_command(validate_command)
