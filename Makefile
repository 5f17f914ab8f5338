# The two commands of README.md. Both install what they need first (scripts/setup.sh, as root):
# `make demo` only what a run and its report need, `make test` the test tooling too.
.PHONY: setup setup-demo demo test check bench

setup:
	bash scripts/setup.sh

setup-demo:
	bash scripts/setup.sh demo

# Run the default scenario (natively where the host can, else in a virtme-ng VM) and report it.
demo: setup-demo
	.venv/bin/cctest run demo
	.venv/bin/cctest report reports/demo -o reports/demo.html
	@echo "report: reports/demo.html"

# Unit tests, the Dockerfile built and run (podman), then the real stack in User-Mode Linux guests
# with a cross-check in stock-kernel QEMU VMs (tests/vm/harness.py; CCTEST_ENGINE=qemu|uml chooses;
# CCTEST_REQUIRE_VM=1, CCTEST_REQUIRE_CONTAINER=1: no silent skips).
test: setup
	CCTEST_REQUIRE_VM=1 CCTEST_REQUIRE_CONTAINER=1 .venv/bin/pytest -v -rs

# The inner loop: ruff and mypy, then the fast tests (no VM, no container; the test tooling as
# `make test` installs it). tests/repo/test_lint.py runs both in `make test` too.
check:
	.venv/bin/ruff check cctest tests bench
	.venv/bin/mypy
	.venv/bin/pytest -q -m "not vm and not container"

bench: setup
	.venv/bin/python bench/report.py
