"""The `cctest` command line: parse, call, print. Exit 2 for bad input, 1 for failed runs, 130 on Ctrl-C."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from . import __version__, doctor, journal, kmod
from .plan import expand
from .report.command import report_command
from .scenario import ScenarioError, load_experiments

DEFAULT_EXPERIMENTS = "experiments.yaml"
console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)


def load_or_exit(path: str):
    try:
        return load_experiments(path)
    except ScenarioError as error:
        fail(str(error), 2)


experiments_option = click.option("-f", "--file", "experiments_file", default=DEFAULT_EXPERIMENTS, show_default=True,
                                  type=click.Path(dir_okay=False), help="the experiments file")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__)
def main() -> None:
    """Experiment-as-code for TCP congestion-control research."""


@main.command("list")
@experiments_option
def list_scenarios(experiments_file: str) -> None:
    """Show the scenarios in the experiments file."""
    experiments = load_or_exit(experiments_file)
    table = Table("scenario", "link", "buffer", "flows", "duration", "runs")
    for name, scenario in experiments.scenarios.items():
        link = scenario.link
        buffer = f"{link.buffer_bdp:g} BDP" if link.buffer_bdp is not None else f"{link.buffer_bytes} B"
        flows = ", ".join(
            f"{f.count}x{f.cc}" + (f"@{f.rtt_ms:g}ms" if f.rtt_ms else "") + (f"+{f.start_s:g}s" if f.start_s else "")
            for f in scenario.flows
        )
        variants = 1
        for values in scenario.matrix.values():
            variants *= len(values)
        loss = f", loss {link.loss_pct:g}%" if link.loss_pct else ""
        table.add_row(name, f"{link.rate_mbps:g} Mbit/s, {link.rtt_ms:g} ms{loss}", buffer, flows,
                      f"{scenario.duration_s:g} s", f"{variants}x{scenario.repetitions}")
    console.print(table)


@main.command()
@click.argument("scenarios", nargs=-1, required=True)
@experiments_option
@click.option("--repetitions", "-n", type=click.IntRange(min=1), help="override the scenario's repetitions")
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False), help="where run directories go")
@click.option("--vm", "mode", flag_value="vm", help="run inside a virtme-ng VM on a stock kernel")
@click.option("--native", "mode", flag_value="native", help="run on this host's kernel")
@click.option("--kernel", type=click.Path(dir_okay=False), help="kernel image for --vm (default: the one linux-image-amd64 points to, else the newest /boot/vmlinuz-*)")
@click.option("--kvm", is_flag=True, help="use KVM for --vm instead of software emulation (wall clock)")
@click.option("--clock", type=click.Choice(["virtual", "wall"]), default=None,
              help="--vm's clock: virtual (QEMU's instruction counter: faithful whatever the host's speed; the "
                   "default) or wall (the host's; the default with --kvm)")
@click.option("--icount-shift", type=int, default=None,
              help="virtual clock: 2**N ns of guest time per instruction (0-10, default 0: the fastest guest CPU)")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="--vm: VMs in parallel, one vCPU each (default: the host's cores on the virtual clock, 1 on the wall clock)")
@click.option("--dry-run", is_flag=True, help="print topology, commands and flow schedule; change nothing")
@click.option("--no-ingest", is_flag=True, hidden=True)
@click.option("--in-vm", is_flag=True, hidden=True)
@click.option("--manifest", type=click.Path(dir_okay=False), hidden=True)
@click.option("--only-runs", hidden=True, help="inside a VM: comma-separated indices of this VM's runs")
def run(scenarios, experiments_file, repetitions, out, mode, kernel, kvm, clock, icount_shift, jobs, dry_run,
        no_ingest, in_vm, manifest, only_runs) -> None:
    """Run SCENARIOS for real and write one run directory per run."""
    from . import dumbbell, vm
    from .session import NativeUnavailable, RunOptions, SessionError, choose_mode, run_in_vm, run_native

    experiments = load_or_exit(experiments_file)
    try:
        specs = [spec for name in scenarios for spec in expand(experiments, name, repetitions)]
    except ScenarioError as error:
        fail(str(error), 2)
    try:
        vm_clock = vm.VMClock.choose(clock, icount_shift, kvm)
    except vm.VMOptionError as error:
        fail(str(error), 2)
    if only_runs:
        try:
            specs = [specs[int(i)] for i in only_runs.split(",")]
        except (ValueError, IndexError):
            fail(f"--only-runs {only_runs}: indices of this invocation's {len(specs)} runs, comma-separated", 2)
    if dry_run:
        for spec in specs:
            click.echo(dumbbell.describe(spec))
        return
    opts = RunOptions(Path(experiments_file), list(scenarios), repetitions, Path(out), mode or "auto", kernel, kvm,
                      not no_ingest, in_vm, Path(manifest) if manifest else None, vm_clock, jobs)
    try:
        chosen = choose_mode(opts.mode, specs, console, in_vm)
        if chosen == "native" and not in_vm and (jobs or 1) > 1:
            console.print("[yellow]notice:[/] -j spreads runs over VMs; native runs go one at a time")
        run_dirs = (run_in_vm if chosen == "vm" else run_native)(specs, opts, console)
    except (SessionError, kmod.ModuleError, journal.RunLockedError) as error:
        bad_input = (journal.RunLockedError, NativeUnavailable, kmod.BadParameter)
        fail(str(error), 2 if isinstance(error, bad_input) else 1)
    except KeyboardInterrupt:
        err_console.print("interrupted: torn down; what was measured is kept")
        sys.exit(130)
    except Exception as error:  # noqa: BLE001 - a failed run is reported in one line, details in meta.json
        fail(f"run failed: {error}", 1)
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
def clean() -> None:
    """Remove what a run killed with SIGKILL left behind (namespaces, links, processes, modules)."""
    actions = journal.clean()
    for line in actions:
        console.print(line)
    console.print("nothing to clean" if not actions else f"{len(actions)} leftover(s) removed")


@main.group()
def modules() -> None:
    """Build, load, unload and list this project's congestion-control modules."""


release_option = click.option("--kernel-release", "-r", default=platform.release, show_default="running kernel",
                              help="kernel release to build for")


@modules.command("build")
@release_option
def modules_build(kernel_release: str) -> None:
    try:
        built = kmod.build(kernel_release, verbose=True)
    except kmod.ModuleError as error:
        fail(str(error), 1)
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
        fail("parameters must be key=integer", 2)
    try:
        loaded = kmod.load(name, parsed, kernel_release)
    except kmod.ModuleError as error:
        fail(str(error), 2 if isinstance(error, kmod.BadParameter) else 1)
    console.print(f"{name} available; parameters {loaded.effective_params}")


@modules.command("unload")
@click.argument("name")
def modules_unload(name: str) -> None:
    try:
        kmod.unload(name if name in kmod.PROJECT_CCS else f"tcp_{name}")
    except kmod.ModuleError as error:
        fail(str(error), 1)
    console.print(f"{name} unloaded")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
def ingest(run_dirs) -> None:
    """(Re)make the tidy tables and health verdict of run directories from their raw captures."""
    from .session import finalize

    for run_dir in run_dirs:
        finalize(Path(run_dir), console)


main.add_command(report_command)
