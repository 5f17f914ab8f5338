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
    """Boot one VM, run every needed job, ingest the run dirs on the host; return results.json.

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
    code = vm.run(kernel, [sys.executable, str(GUEST), str(out), *jobs], [out])
    results_path = out / "results.json"
    assert results_path.exists(), f"the guest suite wrote no results (VM exit code {code})"
    results = json.loads(results_path.read_text())
    console = Console(stderr=True)
    for job in results.values():
        for run_dir in job["run_dirs"]:
            finalize(Path(run_dir), console)
    results["_dmesg"] = (out / "dmesg.txt").read_text() if (out / "dmesg.txt").exists() else None
    results["_out"] = str(out)
    return results


def dmesg_problems(dmesg: str) -> list[str]:
    return [line for line in dmesg.splitlines() if any(bad in line for bad in DMESG_BAD)]
