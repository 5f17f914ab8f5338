"""The `cctest` command line: parse, call, print. Errors reach the user through errors.Group: one
line and the exit code their class carries (2 bad input, 1 a failed run, 3 failed claims)."""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from . import __version__, doctor, errors, journal, kmod
from .errors import BadInput, CctestError
from .plan import MAX_RUNS, expand, run_count
from .report.command import check_command, report_command
from .scenario import load_experiments

DEFAULT_EXPERIMENTS = "experiments.yaml"
console = Console()
err_console = Console(stderr=True)


experiments_option = click.option("-f", "--file", "experiments_file", default=DEFAULT_EXPERIMENTS, show_default=True,
                                  type=click.Path(dir_okay=False), help="the experiments file")


@click.group(cls=errors.Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)
def main() -> None:
    """Experiment-as-code for TCP congestion-control research."""


force_option = click.option("--force", is_flag=True, help=f"allow more than {MAX_RUNS} runs in one invocation")


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


@main.command("list")
@experiments_option
@click.option("--tag", "tags", multiple=True, help="only scenarios with this tag (repeatable: any of them)")
@force_option
def list_scenarios(experiments_file: str, tags: tuple[str, ...], force: bool) -> None:
    """Show the scenarios, their claims and estimated wall time (every matrix variant is validated as
    `run` does)."""
    import os

    from .plan import estimated_wall_s

    experiments = load_experiments(experiments_file)
    names = tagged(experiments, experiments_file, tags) if tags else list(experiments.scenarios)
    chosen = {name: experiments.scenarios[name] for name in dict.fromkeys(names)}
    cores = os.cpu_count() or 1
    table = Table("scenario", "tags", "bottleneck", "flows", "runs", "claims", "native", f"--vm -j{cores}",
                  caption=f"native, --vm: estimated wall time (the VM's from bench/vm_clock.py's figures, {cores} "
                          "single-vCPU VMs in parallel)")
    table.columns[0].no_wrap = True
    totals = [0, 0.0, 0.0]
    for name, scenario in chosen.items():
        specs = expand(experiments, name, force=force)
        link = scenario.link
        buffer = f"{link.buffer_bdp:g} BDP" if link.buffer_bdp is not None else f"{link.buffer_bytes} B"
        flows = ", ".join(
            f"{f.count}x{f.cc}" + (f"@{f.rtt_ms:g}ms" if f.rtt_ms else "") + (f"+{f.start_s:g}s" if f.start_s else "")
            for f in scenario.flows
        )
        native = sum(estimated_wall_s(spec, vm=False) for spec in specs)
        in_vm = sum(estimated_wall_s(spec, vm=True) for spec in specs) / min(cores, len(specs))
        totals = [totals[0] + len(specs), totals[1] + native, totals[2] + in_vm]
        loss = f", loss {link.loss_pct:g}%" if link.loss_pct else ""
        loss += "".join(f", outage {o.at_s:g}-{o.at_s + o.duration_s:g} s" for o in link.outages)
        table.add_row(name, ", ".join(scenario.tags), f"{link.rate_mbps:g} Mbit/s, {link.rtt_ms:g} ms, {buffer}{loss}",
                      f"{flows}; {scenario.duration_s:g} s", str(len(specs)), str(len(scenario.expect) or ""),
                      _duration(native), _duration(in_vm))
    if len(chosen) > 1:
        table.add_row("all", "", "", "", str(totals[0]), "", _duration(totals[1]), _duration(totals[2]))
    console.print(table)


def tagged(experiments, experiments_file: str, tags: tuple[str, ...]) -> list[str]:
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
    match = re.fullmatch(r"(\d+)/(\d+)", value.strip())
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise BadInput(f"--shard {value}: give i/N with 1 <= i <= N, e.g. 2/4")
    return int(match[1]), int(match[2])


@main.command()
@click.argument("scenarios", nargs=-1)
@experiments_option
@click.option("--tag", "tags", multiple=True, help="also run every scenario with this tag (repeatable)")
@click.option("--repetitions", "-n", type=click.IntRange(min=1), help="override the scenario's repetitions")
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False), help="where run directories go")
@click.option("--vm", "mode", flag_value="vm", help="run inside a virtme-ng VM on a stock kernel")
@click.option("--native", "mode", flag_value="native", help="run on this host's kernel")
@click.option("--engine", type=click.Choice(["qemu", "uml"]), default="qemu", show_default=True,
              help="--vm's emulator: qemu (a stock distro kernel on QEMU's instruction counter) or uml (this "
                   "project's User-Mode Linux build in time-travel mode: cheaper, not the stock kernel; docs/uml.md)")
@click.option("--kernel", type=click.Path(), help="kernel image for --vm (default: the one linux-image-amd64 points to, else the newest /boot/vmlinuz-*)")
@click.option("--kvm", is_flag=True, help="use KVM for --vm instead of software emulation (wall clock)")
@click.option("--clock", type=click.Choice(["virtual", "wall"]), default=None,
              help="--vm's clock: virtual (QEMU's instruction counter: faithful whatever the host's speed; the "
                   "default) or wall (the host's; the default with --kvm)")
@click.option("--icount-shift", type=int, default=None,
              help="virtual clock: 2**N ns of guest time per instruction (0-10, default 0: the fastest guest CPU)")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="--vm: VMs in parallel, one vCPU each (default: the host's cores on the virtual clock, 1 on the wall clock)")
@click.option("--shard", metavar="i/N",
              help="run only shard i of N (a stable split of this invocation's runs; with --dry-run, shows which)")
@click.option("--dry-run", is_flag=True, help="print topology, commands and flow schedule; change nothing")
@force_option
@click.option("--no-ingest", is_flag=True, hidden=True)
@click.option("--in-vm", is_flag=True, hidden=True)
@click.option("--manifest", type=click.Path(dir_okay=False), hidden=True)
@click.option("--only-runs", hidden=True, help="inside a VM: comma-separated indices of this VM's runs")
def run(scenarios, experiments_file, tags, repetitions, out, mode, engine, kernel, kvm, clock, icount_shift, jobs, shard,
        dry_run, force, no_ingest, in_vm, manifest, only_runs) -> None:
    """Run SCENARIOS for real and write one run directory per run."""
    from . import dumbbell, vm
    from .session import RunOptions, choose_mode, run_in_vm, run_native

    experiments = load_experiments(experiments_file)
    # named scenarios as given (twice is twice), then the tagged ones not named already
    scenarios = [*scenarios, *(name for name in dict.fromkeys(tagged(experiments, experiments_file, tags))
                               if name not in scenarios)]
    if not scenarios:
        raise BadInput("name at least one scenario, or --tag (cctest list shows both)")
    total = sum(run_count(experiments, name, repetitions) for name in scenarios)
    if total > MAX_RUNS and not force:
        raise BadInput(f"{experiments_file}: {' '.join(scenarios)}: {total} runs in one invocation; at most "
                       f"{MAX_RUNS} without --force")
    specs = [spec for name in scenarios for spec in expand(experiments, name, repetitions, force=force)]
    vm_clock = vm.VMClock.choose(clock, icount_shift, kvm)
    if kernel and engine == "qemu":
        vm.pick_kernel(kernel)  # a path that is no kernel image is bad input, found before anything is set up
    if engine != "qemu" and mode != "vm":
        raise BadInput(f"--engine {engine} is for --vm runs; add --vm")
    if only_runs:
        try:
            specs = [specs[int(i)] for i in only_runs.split(",")]
        except (ValueError, IndexError):
            raise BadInput(f"--only-runs {only_runs}: indices of this invocation's {len(specs)} runs, "
                           "comma-separated") from None
    shard = parse_shard(shard)
    if shard:
        from .plan import shard as shard_of

        mine = shard_of(specs, *shard)
        click.echo(f"shard {shard[0]}/{shard[1]}: {len(mine)} of {len(specs)} runs"
                   + "".join(f"\n  {specs[i].scenario.name} {specs[i].label} r{specs[i].repetition}" for i in mine))
        specs = [specs[i] for i in mine]
        if not specs:
            return
    if dry_run:
        for spec in specs:
            click.echo(dumbbell.describe(spec))
        return
    opts = RunOptions(Path(experiments_file), list(scenarios), repetitions, Path(out), mode or "auto", kernel, kvm,
                      not no_ingest, in_vm, Path(manifest) if manifest else None, vm_clock, jobs, force, engine)
    try:
        chosen = choose_mode(opts.mode, specs, console, in_vm)
        if chosen == "native" and not in_vm and (jobs or 1) > 1:
            console.print("[yellow]notice:[/] -j spreads runs over VMs; native runs go one at a time")
        run_dirs = (run_in_vm if chosen == "vm" else run_native)(specs, opts, console)
    except KeyboardInterrupt:
        err_console.print("interrupted: torn down; what was measured is kept")
        sys.exit(errors.INTERRUPTED)
    except CctestError:
        raise
    except Exception as error:  # noqa: BLE001 - a failed run is reported in one line, details in meta.json
        raise CctestError(f"run failed: {error}") from error
    else:
        for run_dir in run_dirs:
            console.print(f"run directory: {run_dir}")


@main.command("doctor")
def doctor_command() -> None:
    """Check what this host can do and say where runs will happen."""
    results = doctor.checks()
    table = Table("capability", "status", "detail", "needed for", "fix")
    for check in results:
        table.add_row(check.name, "[green]ok[/]" if check.ok else "[red]missing[/]", check.detail,
                      check.needed_for, "" if check.ok else check.fix)
    console.print(table)
    verdict = doctor.verdict(results)
    console.print(f"[bold]mode:[/] {verdict}")
    if verdict.startswith("native"):
        console.print(f"[bold]with --vm:[/] {doctor.vm_clock_verdict()}")


@main.command()
@click.option("--force", is_flag=True,
              help="clean even while a run holds the lock, and also remove cc* links, Mininet host shells and "
                   "modules the journal does not name or cannot vouch for")
def clean(force: bool) -> None:
    """Remove what a run killed with SIGKILL left behind, as its journal names it (the run's cgroup with
    every process in it, links, host shells, processes, a tracefs mount, modules, sysctls)."""
    actions = journal.clean(force=force)
    for line in actions:
        console.print(line, highlight=False, soft_wrap=True)  # one line each, paths unbroken
    if not actions:
        console.print("nothing to clean" + ("" if force else ": no journal of a killed run (--force also removes "
                                                              "anything that looks like a cctest run's)"))


@main.group()
def modules() -> None:
    """Build, load, unload and list this project's congestion-control modules."""


release_option = click.option("--kernel-release", "-r", default=platform.release, show_default="running kernel",
                              help="kernel release to build for")


@modules.command("build")
@release_option
def modules_build(kernel_release: str) -> None:
    built = kmod.build(kernel_release, verbose=True)
    for name, path in sorted(built.items()):
        console.print(f"{name}: {path}")


@modules.command("list")
@release_option
def modules_list(kernel_release: str) -> None:
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
    try:
        parsed = {k: int(v) for k, v in (p.split("=", 1) for p in params)}
    except ValueError:
        raise BadInput(f"modules load {name} {' '.join(params)}: parameters are key=integer, e.g. x=1") from None
    loaded = kmod.load(name, parsed, kernel_release)
    console.print(f"{name} available; parameters {loaded.effective_params}")


@modules.command("unload")
@click.argument("name")
def modules_unload(name: str) -> None:
    kmod.unload(name if name in kmod.PROJECT_CCS else f"tcp_{name}")
    console.print(f"{name} unloaded")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
def ingest(run_dirs) -> None:
    """(Re)make the tidy tables and health verdict of run directories from their raw captures."""
    from .session import finalize_each

    failures: list[str] = []
    finalize_each([Path(run_dir) for run_dir in run_dirs], console, failures)
    if failures:
        raise CctestError(f"ingest failed for {len(failures)} of {len(run_dirs)} run(s); the first: {failures[0]}")


main.add_command(report_command)
main.add_command(check_command)
