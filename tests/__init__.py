"""cctest's tests, one folder per kind, by what a test needs to run: unit/, reliability/, repo/, c/,
vm/, cluster/, container/, and the recorded data they share in fixtures/ (docs/testing.md, "Tests",
says what each holds). conftest.py holds the marks `make check` and `make test` select by to the
folders."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
