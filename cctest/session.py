"""A `cctest run` invocation: pick native or VM, run every RunSpec, make the tables.

Native: take the lock, build modules for the running kernel, run each spec, ingest each run dir.
VM: build modules for the guest kernel on the host, boot one VM that runs the same command with
`--native --in-vm --no-ingest`, then ingest the run dirs it lists in the manifest.
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from . import doctor, kmod, vm
from .journal import Journal
from .plan import RunSpec
from .rundir import write_meta


@dataclass
class RunOptions:
    experiments_file: Path
    names: list[str]
    repetitions: int | None
    out: Path
    mode: str  # auto | native | vm
    kernel: str | None
    kvm: bool
    ingest: bool
    in_vm: bool
    manifest: Path | None


class SessionError(Exception):
    """A one-line reason the session cannot start (exit 2) or could not finish (exit 1)."""


def finalize(run_dir: Path, console: Console) -> None:
    """Raw captures -> tidy tables and the health verdict. Safe on partial (interrupted) runs."""
    from .checks import write_checks
    from .ingest import ingest_run

    meta_path = run_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    if meta.get("status") == "running":
        # The process (or VM) that ran it died without a word: whatever it measured stays.
        meta.update(status="interrupted", error=meta.get("error") or "the run's process ended before finishing")
        write_meta(run_dir, meta)
    tables = ingest_run(run_dir)
    write_checks(run_dir, meta, tables)
    verdict = json.loads((run_dir / "checks.json").read_text()).get("verdict", "?")
    console.print(f"[bold]{run_dir}[/]: status {meta['status']}, emulation health {verdict}")


def needs_modules(specs: list[RunSpec]) -> bool:
    """Whether the runs need module loading: this project's modules, or kernel ccs not built in."""
    available = kmod.available_ccs()
    return any(cc in kmod.PROJECT_CCS or cc not in available for spec in specs for cc in spec.modules)


class NativeUnavailable(SessionError):
    """--native was asked for on a host that lacks what the run needs (bad input: exit 2)."""


def choose_mode(requested: str, specs: list[RunSpec], console: Console, in_vm: bool = False) -> str:
    """native or vm, probing the host once. Inside the VM the host has already decided."""
    if requested == "vm" or in_vm:
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


def run_native(specs: list[RunSpec], opts: RunOptions, console: Console) -> list[Path]:
    from .net.topology import Topologies
    from .runner import Run

    release = platform.release()
    journal = Journal()
    journal.acquire(f"pid {journal.data['pid']}: {', '.join(opts.names)}")
    run_dirs: list[Path] = []
    leftovers = False
    topologies = Topologies()
    try:
        if any(cc in kmod.PROJECT_CCS for spec in specs for cc in spec.modules) and not opts.in_vm:
            kmod.build(release)
        # Only what changes how a run is made; the full doctor costs seconds under emulation.
        with_fq = doctor.probe_qdisc("fq")
        with_bpftrace = doctor.which("bpftrace") is not None
        for spec in specs:
            console.rule(f"{spec.scenario.name} {spec.label} repetition {spec.repetition}")
            run = Run(spec, opts.out, "vm" if opts.in_vm else "native", journal, console, release, topologies,
                      with_fq=with_fq, with_bpftrace=with_bpftrace)
            run_dirs.append(run.dir)
            _record(opts.manifest, run.dir)
            try:
                run.execute()
            finally:
                leftovers = leftovers or not run.torn_down_cleanly
                if opts.ingest:
                    finalize(run.dir, console)
    finally:
        try:
            topologies.close()
        except Exception as error:  # noqa: BLE001 - the journal must still be settled
            console.print(f"[red]teardown of the shared topology failed: {error}[/]")
            leftovers = True
        if leftovers:
            # Keep the journal: `cctest clean` undoes what teardown could not.
            console.print("[red]teardown was incomplete (see meta.json warnings); run `cctest clean`[/]")
            journal.release()
        else:
            journal.finish()
    return run_dirs


def run_in_vm(specs: list[RunSpec], opts: RunOptions, console: Console) -> list[Path]:
    kernel = vm.pick_kernel(opts.kernel)
    release = vm.guest_release(kernel)
    if any(cc in kmod.PROJECT_CCS for spec in specs for cc in spec.modules):
        console.print(f"building modules for {release}")
        kmod.build(release)
        for spec in specs:
            for cc, params in spec.modules.items():
                kmod.check_params(cc, params, release)
    opts.out.mkdir(parents=True, exist_ok=True)
    out = opts.out.resolve()
    manifest = out / f".manifest-{Path(kernel).name}-{id(specs)}.txt"
    manifest.unlink(missing_ok=True)
    guest = [sys.executable, "-m", "cctest", "run", *opts.names, "-f", str(opts.experiments_file.resolve()),
             "--out", str(out), "--native", "--in-vm", "--no-ingest", "--manifest", str(manifest)]
    if opts.repetitions is not None:
        guest += ["--repetitions", str(opts.repetitions)]
    console.print(f"booting {kernel.name} in virtme-ng ({'KVM' if opts.kvm else 'software emulation'})")
    code = 1
    try:
        code = vm.run(kernel, guest, [out], kvm=opts.kvm)
    finally:
        run_dirs = [Path(line) for line in manifest.read_text().split()] if manifest.exists() else []
        manifest.unlink(missing_ok=True)
        if opts.ingest:
            for run_dir in run_dirs:
                if (run_dir / "meta.json").exists():
                    finalize(run_dir, console)
    if code != 0:
        raise SessionError(f"the run inside the VM exited with {code}")
    return run_dirs
