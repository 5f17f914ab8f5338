"""A test's folder says what it needs (docs/testing.md, "Tests"): every test under vm/ and cluster/ is
marked vm, every one under container/ container, no other carries either mark, and none lies
loose in tests/, so that the folders and `-m "not vm and not container"` (`make check`) select the
same tests."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MARKS = ("vm", "container")
MARK_OF_FOLDER = {"vm": "vm", "cluster": "vm", "container": "container"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        path = Path(item.path).resolve()
        if not path.is_relative_to(HERE):
            continue
        parts = path.relative_to(HERE).parts
        if len(parts) == 1:
            misplaced.append(f"{item.nodeid} (in no folder)")
            continue
        folder = parts[0]
        expected = {MARK_OF_FOLDER[folder]} if folder in MARK_OF_FOLDER else set()
        marks = {mark for mark in MARKS if item.get_closest_marker(mark)}
        if marks != expected:
            misplaced.append(f"{item.nodeid} (marked {', '.join(sorted(marks)) or 'neither'}; "
                             f"tests/{folder}/ wants {', '.join(sorted(expected)) or 'neither'})")
    if misplaced:
        raise pytest.UsageError("tests in the wrong folder for their marks (docs/testing.md, \"Tests\"):\n  "
                                + "\n  ".join(misplaced))
