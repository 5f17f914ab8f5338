"""Shared fixtures. VM tests: one VM boot runs every job the selected tests need (tests/vm/guest.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GUEST = REPO / "tests" / "vm" / "guest.py"
DMESG_BAD = ("BUG:", "WARNING:", "Oops", "general protection fault", "Call Trace:", "refcount_t:", "list_add corruption",
             "UBSAN:", "KASAN:", "kernel panic")


def build_c_harness(tmp_path_factory, source: str, what: str) -> Path:
    """tests/c/<source>.c compiled against modules/bbr3's headers into a fresh tmp directory."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail(f"no C compiler (cc/gcc): needed to build the {what} harness")
    binary = tmp_path_factory.mktemp(source) / source
    subprocess.run([cc, "-Wall", "-Werror", "-O1", f"-I{REPO / 'modules' / 'bbr3'}", "-o", str(binary),
                    str(REPO / "tests" / "c" / f"{source}.c")], check=True)
    return binary


def pytest_configure(config):
    config.addinivalue_line("markers", "vm_jobs(*jobs): jobs of tests/vm/guest.py this test asserts on")


def _jobs_of(items) -> list[str]:
    jobs: list[str] = []
    for item in items:
        for marker in item.iter_markers("vm_jobs"):
            for job in marker.args:
                if job not in jobs:
                    jobs.append(job)
    return jobs


def _vm_unavailable() -> str | None:
    from cctest import doctor

    problems = doctor.vm_problems(doctor.checks())
    if problems:
        return "VM path not available: " + "; ".join(f"{c.name} ({c.fix})" for c in problems)
    return None


@pytest.fixture(scope="session")
def vm_results(request):
    """Boot VMs (CCTEST_VM_JOBS, default the host's cores) that run every needed job between them,
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
    reason = _vm_unavailable()
    if reason:
        if os.environ.get("CCTEST_REQUIRE_VM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    from cctest import kmod, vm
    from cctest.session import finalize
    from rich.console import Console

    jobs = _jobs_of(request.session.items)
    # Kept after the session (pytest's tmp dirs are pruned), so a failure can be inspected.
    out = REPO / "build" / "vm-tests" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    kernel = vm.pick_kernel(os.environ.get("CCTEST_KERNEL"))
    if kmod.source_trees():
        kmod.build(vm.guest_release(kernel))
    vms = vm_shares(jobs, int(os.environ.get("CCTEST_VM_JOBS", os.cpu_count() or 1)))
    procs = []
    for k, args in enumerate(vms):
        (out / f"vm{k}").mkdir()
        procs.append(vm.start(kernel, [sys.executable, str(GUEST), str(out / f"vm{k}"), *args], [out / f"vm{k}"],
                              log=out / f"vm{k}.log"))
    codes = [proc.wait() for proc in procs]
    results, dmesg = merge_vm_results([out / f"vm{k}" for k in range(len(vms))], codes)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "dmesg.txt").write_text(dmesg)
    console = Console(stderr=True)
    for job in results.values():
        for run_dir in job["run_dirs"]:
            finalize(Path(run_dir), console)
    results["_dmesg"] = dmesg or None
    results["_out"] = str(out)
    return results


def vm_shares(jobs: list[str], n_vms: int) -> list[list[str]]:
    """guest.py's arguments for each VM: the plain jobs' runs split as `cctest run -j` splits
    them, and each interrupt/kill job (one short and one long run) on the VM with the least."""
    from cctest.plan import RUN_OVERHEAD_S, expand, split_for_vms
    from cctest.scenario import load_experiments

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
    shares = []
    for part, specials in zip(parts, extra):
        args = (["--only-runs", ",".join(map(str, part)), *plain] if part else []) + specials
        if args:
            shares.append(args)
    return shares


def merge_vm_results(dirs: list[Path], codes: list[int]) -> tuple[dict, str]:
    """One results.json and one dmesg from every VM's: a job's run dirs from all VMs, its exit code
    the worst, what each VM left behind together."""
    merged: dict = {}
    dmesg = []
    for k, (vm_dir, code) in enumerate(zip(dirs, codes)):
        path = vm_dir / "results.json"
        assert path.exists(), f"VM {k}: the guest suite wrote no results (VM exit code {code}; {vm_dir}.log)"
        for job, entry in json.loads(path.read_text()).items():
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


def dmesg_problems(dmesg: str) -> list[str]:
    return [line for line in dmesg.splitlines() if any(bad in line for bad in DMESG_BAD)]
