#!/usr/bin/env bash
# Installs everything cctest needs on a fresh Debian 12 machine (root): the emulation stack, a stock
# kernel for `cctest run --vm`, and the Python environment in .venv. Safe to run again.
#   scripts/setup.sh        everything, with the test tooling (chromium, linters, podman, Go): `make test`, CI
#   scripts/setup.sh demo   only what running and reporting a scenario needs: `make demo`
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-all}
case "$profile" in
  all|demo) ;;
  *) echo "scripts/setup.sh: unknown profile '$profile'; allowed: all (default), demo" >&2; exit 2 ;;
esac

if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup.sh: run as root (it installs Debian packages and emulates networks)" >&2
  exit 2
fi

packages=(
  # the emulated network and its traffic
  mininet bridge-utils iproute2 ethtool iperf3 iputils-ping tcpdump bpftrace kmod procps psmisc
  # a stock kernel to boot with virtme-ng, its headers to build modules against, and qemu
  qemu-system-x86 busybox-static linux-image-amd64 linux-headers-amd64 make gcc
)
if [ "$profile" = all ]; then
  packages+=(
    # the report's browser tests and figure export; the workflow and example scripts' linters
    chromium chromium-driver shellcheck
    # the container test (tests/container/test_container.py): podman with runc, and debootstrap for its base image
    podman runc debootstrap
    # the Slurm test (tests/cluster/test_slurm.py): a single-node cluster it starts itself
    slurm-wlm munge
  )
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Headers of a 6.10+ kernel too, so the tests compile the modules against the new cong_control
# signature (Debian 12 carries 6.12; take the newest it offers).
new_headers=$(apt-cache search --names-only '^linux-headers-6\.1[0-9]\.[0-9.]+\+deb12-amd64$' | awk '{print $1}' | sort -V | tail -1)
if [ -n "$new_headers" ] && ! dpkg-query -W -f='${Status}' "$new_headers" 2>/dev/null | grep -q "ok installed"; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$new_headers" >/dev/null
fi

# Go, to build actionlint below: installed now, for apt must not run beside the kernel's build.
if [ "$profile" = all ]; then
  go=$(command -v go || echo /usr/local/go/bin/go)
  if [ ! -x "$go" ] && [ ! -x .venv/bin/actionlint ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    go=$(command -v go)
  fi
fi

# The UML engine's kernel (cctest run --vm --engine uml): Debian's linux-source-6.1 built for ARCH=um
# with time travel, cached per source version, config fragment and patches (a no-op when cached; about
# 10 min of CPU on 2 cores otherwise). It builds while the steps below, which mostly wait on the
# network, install the Python packages, actionlint and the container's base image; it runs apt itself
# (its source package), so nothing below does. Its own session, so that leaving early stops its make
# (-w: should setsid have to fork, it still waits, and $! still ends with the build).
uml_log=$(mktemp)
setsid -w bash scripts/uml-kernel.sh > "$uml_log" 2>&1 &
uml_build=$!
# (set -e holds in a trap too: a build already ended must not stop it before the rm)
trap 'kill -- "-$uml_build" 2>/dev/null || true; rm -f "$uml_log"' EXIT
# Its output, then its exit status.
finish_uml_kernel() {
  local status=0
  wait "$uml_build" || status=$?
  cat "$uml_log"
  rm -f "$uml_log"
  trap - EXIT
  return "$status"
}

# Debian's mininet package installs its library for /usr/bin/python3 only: the venv sees it
# through --system-site-packages.
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
# A registry may reset a connection mid-download (pip's own retries then give up on that file): an
# install that failed is tried twice more; pip keeps what it had already fetched in its cache.
pip_install() {
  local attempt
  for attempt in 1 2 3; do
    .venv/bin/pip install -q "$@" && return 0
    [ "$attempt" = 3 ] || { echo "setup: pip install failed (attempt $attempt of 3); trying again" >&2; sleep 10; }
  done
  return 1
}
pip_install --upgrade pip 'setuptools>=77'  # the build backend pyproject.toml names, for builds without isolation (tests/repo/test_packaging.py)
if [ "$profile" = demo ]; then
  pip_install -e '.[run]'
  # The default engine's kernel, so that the demo runs on UML (3-5x cheaper than QEMU); `cctest run`
  # falls back to QEMU, and says so, where it could not be built.
  finish_uml_kernel || echo "setup: the UML kernel did not build; runs in a VM use QEMU" >&2
  echo "setup (demo) done: $(.venv/bin/cctest --version)"
  exit 0
fi
pip_install -e '.[run,test,bench,export]'

# actionlint (a Go module, from the Go module proxy) lints .github/workflows in the tests.
if [ ! -x .venv/bin/actionlint ]; then
  GOBIN="$PWD/.venv/bin" "$go" install github.com/rhysd/actionlint/cmd/actionlint@v1.7.7
fi
# The container test builds the Dockerfile FROM debian:bookworm-slim; without a registry, make that
# image locally from the Debian mirror (skipped when an engine already has it).
bash scripts/container-base.sh
finish_uml_kernel
echo "setup done: $(.venv/bin/cctest --version)"
