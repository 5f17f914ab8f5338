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

# The tests in two parts, by their marks (tests/conftest.py gives them by folder; docs/testing.md, "Tests"):
# the fast ones on WORKERS cores (pytest-xdist; CI's machine has 2), then the VM, cluster and container
# ones in one serial pytest, so that the VM suite's session fixture boots its guests once for all
# its jobs. Together they take every test once (tests/repo/test_makefile.py).
FAST_TESTS := not vm and not container
SLOW_TESTS := vm or container
WORKERS ?= 2
# No silent skips: a missing tool, VM engine or container engine fails the test that needs it.
REQUIRE := CCTEST_REQUIRE_VM=1 CCTEST_REQUIRE_CONTAINER=1

# Unit tests, the Dockerfile built and run (podman), then the real stack in User-Mode Linux guests
# with a cross-check in stock-kernel QEMU VMs (tests/vm/harness.py; CCTEST_ENGINE=qemu|uml chooses).
# Both parts run, whatever the first's outcome, and the target fails if either did.
test: setup
	status=0; \
	$(REQUIRE) .venv/bin/pytest -v -rs -n $(WORKERS) -m "$(FAST_TESTS)" || status=$$?; \
	$(REQUIRE) .venv/bin/pytest -v -rs -m "$(SLOW_TESTS)" || status=$$?; \
	exit $$status

# The inner loop: ruff and mypy, then the fast tests on WORKERS cores (the test tooling as
# `make test` installs it). tests/repo/test_lint.py runs both in `make test` too.
check:
	.venv/bin/ruff check cctest tests bench
	.venv/bin/mypy
	.venv/bin/pytest -q -n $(WORKERS) -m "$(FAST_TESTS)"

bench: setup
	.venv/bin/python bench/report.py
