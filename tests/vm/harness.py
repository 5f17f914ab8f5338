"""The VM suite's harness: one boot of guests runs every job the selected tests need (guest.py runs
them inside), on the engine each job is given, and the host ingests and merges what they ran.
vm/conftest.py hands the result to the tests as the `vm_results` fixture.

Environment: CCTEST_ENGINE=qemu|uml chooses the engine (unset: UML with a QEMU cross-check),
CCTEST_VM_JOBS the guests per engine (default the host's cores), CCTEST_KERNEL the QEMU guest's
kernel, CCTEST_REQUIRE_VM=1 fails where the engine is missing instead of skipping, and
CCTEST_VM_RESULTS=build/vm-tests/<stamp> re-checks the assertions on that earlier output.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

import pytest

from tests import REPO

GUEST = Path(__file__).resolve().parent / "guest.py"


def require_uml_kernel() -> None:
    """Skip (or, with CCTEST_REQUIRE_VM=1, fail) a UML test where the engine's kernel is not built."""
    reason = _engine_unavailable("uml")
    if reason:
        if os.environ.get("CCTEST_REQUIRE_VM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def _jobs_of(items: Iterable[pytest.Item]) -> list[str]:
    """The jobs of guest.py the tests' `vm_jobs` marks name, each once, in the order first named."""
    jobs: list[str] = []
    for item in items:
        for marker in item.iter_markers("vm_jobs"):
            for job in marker.args:
                if job not in jobs:
                    jobs.append(job)
    return jobs


# Where the VM suite's jobs run. `make test` (CCTEST_ENGINE unset) runs them on the UML engine
# (time-travel, 3-5x cheaper per guest second, boots in seconds; docs/uml.md), except a small
# cross-check on QEMU's instruction-counted clock, so that a regression of the QEMU path (virtme-ng,
# the distro kernel and its headers, icount, 9p) is still caught. CCTEST_ENGINE=qemu runs every job
# on QEMU (the suite as it was), CCTEST_ENGINE=uml every job UML can run on UML.
ENGINES = ("qemu", "uml")
# Jobs whose tests assert what the UML engine cannot give, with the reason (measured: docs/measurements.md,
# "The VM test suite on UML, first full run").
QEMU_ONLY = {
    # Its loop churns connections for 15 guest seconds while a thread runs `ss` back to back. Under
    # time-travel=inf-cpu CPU work takes no guest time and the clock jumps only while the CPU idles:
    # with that poller never idle, not even 20 guest s passed in 150 host s (without the poller,
    # 10 000 connections took 159 guest s in 82 host s).
    "diagchurn:bbr3": "infinite CPU: a guest that never idles barely advances its clock",
}
# The cross-check, chosen from what their tests assert:
QEMU_CROSS_CHECK = {
    # the guest CPU health check (test_the_guest_cpu_had_slack: busy share, one vCPU on icount,
    # the vm phases in meta.json in guest and host seconds) and two physics claims (utilisation at
    # 20 and 50 Mbit/s; BBR's share and Jain's index in half a BDP), judged by `cctest check`
    "cubic-fills-the-link": "physics on icount: one CUBIC flow fills the link at 20 and 50 Mbit/s",
    "cubic-bbr-shallow": "physics on icount: BBR takes most of half a BDP from CUBIC; tables agree with iperf3",
    # the engine checks (>= 97 % at the bottleneck, base RTT, a self-describing run directory on
    # the distro kernel) and one of this project's modules (bbr3) built against the distro headers
    "delay-deep": "the engine on the stock kernel, and a module (bbr3) built against its headers",
}


def engine_of_job(job: str, choice: str | None) -> str:
    """The engine a job runs on, for CCTEST_ENGINE=`choice` (None: `make test`'s mix)."""
    if choice == "qemu" or job in QEMU_ONLY:
        return "qemu"
    if choice == "uml":
        return "uml"
    return "qemu" if job in QEMU_CROSS_CHECK else "uml"


def engine_choice() -> str | None:
    choice = os.environ.get("CCTEST_ENGINE") or None
    if choice is not None and choice not in ENGINES:
        raise pytest.UsageError(f"CCTEST_ENGINE={choice}: allowed values are {', '.join(ENGINES)} (unset: UML with "
                                "a QEMU cross-check)")
    return choice


def _engine_unavailable(name: str) -> str | None:
    """Why the engine `name` cannot boot a guest here, or None."""
    if name == "uml":
        from cctest.emulation import umlkernel

        if umlkernel.find() is None:
            return "the UML engine's kernel is not built (scripts/uml-kernel.sh)"
        return None
    from cctest.run import doctor

    problems = doctor.vm_problems(doctor.checks())
    if problems:
        return "VM path not available: " + "; ".join(f"{c.name} ({c.fix})" for c in problems)
    return None


def _engine(name: str):
    from cctest.emulation import engines, vm

    if name == "uml":
        return engines.choose("uml", None, vm.VMClock())
    return engines.choose("qemu", os.environ.get("CCTEST_KERNEL"), vm.VMClock())


def run_vm_jobs(items: Iterable[pytest.Item]) -> dict:
    """Boot guests (CCTEST_VM_JOBS per engine, default the host's cores) that run every job `items`
    need between them, on the engine each job is given (engine_of_job), one engine after the other;
    ingest the run dirs on the host; return the merged results.json.

    CCTEST_VM_RESULTS=build/vm-tests/<stamp> re-checks the assertions on that earlier output instead.
    """
    reuse = os.environ.get("CCTEST_VM_RESULTS")
    if reuse:
        # Re-check assertions against the output of an earlier session (already ingested).
        results = json.loads((Path(reuse) / "results.json").read_text())
        results["_dmesg"] = (Path(reuse) / "dmesg.txt").read_text()
        results["_out"] = reuse
        return results
    choice = engine_choice()
    jobs = _jobs_of(items)
    by_engine = {name: [job for job in jobs if engine_of_job(job, choice) == name] for name in ENGINES}
    by_engine = {name: engine_jobs for name, engine_jobs in by_engine.items() if engine_jobs}
    reasons = [reason for name in by_engine if (reason := _engine_unavailable(name))]
    if reasons:
        if os.environ.get("CCTEST_REQUIRE_VM") == "1":
            pytest.fail("; ".join(reasons))
        pytest.skip("; ".join(reasons))
    from rich.console import Console

    from cctest.kernel import kmod
    from cctest.run.session import finalize

    # Kept after the session (pytest's tmp dirs are pruned), so a failure can be inspected.
    out = REPO / "build" / "vm-tests" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    n_guests = int(os.environ.get("CCTEST_VM_JOBS", os.cpu_count() or 1))
    dirs: list[tuple[Path, Callable[[str], Path]]] = []
    codes: list[int] = []
    # One engine after the other: a UML guest's every syscall is a ptrace round trip, several times
    # dearer when a QEMU guest competes for its CPU (docs/uml.md).
    for name in ("uml", "qemu"):
        if name not in by_engine:
            continue
        engine = _engine(name)
        if kmod.source_trees():
            kdir, make_vars = engine.module_build()
            kmod.build(engine.release(), kdir=kdir, make_vars=make_vars)
        guests = []
        releases = []
        for k, (runs, plain, specials) in enumerate(vm_shares(by_engine[name], n_guests)):
            guest_dir = out / f"{name}{k}"
            guest_dir.mkdir()
            places = engine.places(guest_dir, k)
            args = [*facts_args(places), *plan_args(runs, plain, places), *specials]
            script = f"{places.src}/{GUEST.relative_to(REPO)}"
            guests.append(engine.start([places.python, script, places.out, *args], places, k,
                                       log=out / f"{name}{k}.log"))
            dirs.append((guest_dir, places.to_host))
            releases.append(places.release)
        codes += [guest.wait() for guest in guests]
        for release in releases:  # the guests' own files, once their runs are in guest_dir
            release()
    results, dmesg = merge_vm_results(dirs, codes)
    for job, entry in results.items():
        entry["engine"] = engine_of_job(job, choice)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "dmesg.txt").write_text(dmesg)
    console = Console(stderr=True)
    for job in results.values():
        for run_dir in job["run_dirs"]:
            finalize(Path(run_dir), console)
    results["_dmesg"] = dmesg or None
    results["_out"] = str(out)
    return results


def facts_args(places) -> list[str]:
    """guest.py's --facts: the host's commit and tool versions, in a file beside the plan, for the
    plans guest.py writes itself (the special jobs), as a session's host hands them in its plan."""
    from cctest.host.rundir import host_facts

    suffix = ".facts.json"
    places.host_plan.with_suffix(suffix).write_text(host_facts().model_dump_json())
    return ["--facts", str(PurePosixPath(places.plan).with_suffix(suffix))]


def plan_args(runs: list, plain: list[str], places) -> list[str]:
    """guest.py's arguments for a VM's share of the plain jobs: the plan file holding those runs,
    written where the guest reads it as a session's host writes it, then the jobs' names."""
    from cctest.host.rundir import host_facts
    from cctest.model import guestplan

    if not runs:
        return []
    guestplan.write(places.host_plan, runs, names=plain, out=places.out, manifest=f"{places.out}/runs.manifest",
                    facts=host_facts())
    return ["--plan", places.plan, *plain]


def vm_shares(jobs: list[str], n_vms: int) -> list[tuple[list, list[str], list[str]]]:
    """Each VM's share: the plain jobs' runs split as `cctest run -j` splits them, the plain jobs,
    and each interrupt/kill job (one short and one long run) on the VM with the least."""
    from cctest.model.plan import RUN_OVERHEAD_S, expand, split_for_vms
    from cctest.model.scenario import load_experiments

    plain = [job for job in jobs if ":" not in job]
    special = [job for job in jobs if ":" in job]
    experiments = load_experiments(str(GUEST.parent / "scenarios.yaml"))
    specs = [spec for name in plain for spec in expand(experiments, name)]
    parts = split_for_vms(specs, n_vms) if specs else [[]]
    parts += [[] for _ in range(n_vms - len(parts))] if special else []
    loads = [sum(specs[i].scenario.duration_s + RUN_OVERHEAD_S for i in part) for part in parts]
    extra: list[list[str]] = [[] for _ in parts]
    for job in special:
        k = min(range(len(parts)), key=lambda v: loads[v])
        extra[k].append(job)
        loads[k] += 90  # two runs, one cut short, and a `cctest clean`
    return [([specs[i] for i in part], plain, specials)
            for part, specials in zip(parts, extra, strict=True) if part or specials]


def merge_vm_results(dirs: list[tuple[Path, Callable[[str], Path]]], codes: list[int]) -> tuple[dict, str]:
    """One results.json and one dmesg from every VM's: a job's run dirs from all VMs (by their host
    paths), its exit code the worst, what each VM left behind together."""
    merged: dict = {}
    dmesg = []
    for k, ((vm_dir, to_host), code) in enumerate(zip(dirs, codes, strict=False)):
        path = vm_dir / "results.json"
        assert path.exists(), f"VM {k}: the guest suite wrote no results (VM exit code {code}; {vm_dir}.log)"
        for job, entry in json.loads(path.read_text()).items():
            entry["run_dirs"] = [str(to_host(run_dir)) for run_dir in entry["run_dirs"]]
            if job not in merged:
                merged[job] = entry
                continue
            into = merged[job]
            into["run_dirs"] += entry["run_dirs"]
            into["exit_code"] = entry["exit_code"] if entry["exit_code"] != 0 else into["exit_code"]
            for key, value in entry.get("leftovers", {}).items():
                mine = into["leftovers"][key]
                into["leftovers"][key] = {**mine, **value} if isinstance(mine, dict) else mine + value
        if (vm_dir / "dmesg.txt").exists():
            dmesg.append((vm_dir / "dmesg.txt").read_text())
    return merged, "".join(dmesg)
