"""The VM suite's one fixture: every job the selected tests name, run in guests (harness.py)."""

from __future__ import annotations

import pytest

from tests.vm.harness import run_vm_jobs


@pytest.fixture(scope="session")
def vm_results(request: pytest.FixtureRequest) -> dict:
    """The merged results.json of the guests that ran every job the session's tests name
    (`vm_jobs` marks), their run dirs ingested on the host; see harness.run_vm_jobs."""
    return run_vm_jobs(request.session.items)
