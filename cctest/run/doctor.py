"""What this machine can do, and therefore where runs happen: natively or in a virtme-ng VM.

Qdisc support is probed for real, in a throwaway network namespace, because module lists lie on
kernels without /proc/modules (built-in qdiscs leave no trace there).
"""

from __future__ import annotations

import os
import platform
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..emulation.vm import VMClock, stock_kernels
from ..host.tools import which
from ..kernel.kmod import headers_dir, release_of_kernel_image
from ..model import aqm

DOCTOR_NS_PREFIX = "cctest-doctor-"  # `cctest clean --force` removes these if a probe was killed


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    needed_for: str = "native"  # native | vm | modules | capture | aqm | uml (--engine uml)


@dataclass(frozen=True)
class QdiscNeed:
    """A qdisc some run installs: its kernel module, a `tc qdisc add` spec that creates it, and
    what needs it (a `Check.needed_for`: only "native" sends a host without it to the VM)."""

    module: str
    spec: str
    needed_for: str


# The one list of qdiscs runs install, probed by `cctest doctor`: netem is the bottleneck (rate and
# limit), each flow's delay and the random loss (cctest/model/dumbbell.py); fq paces the senders where the
# kernel has it. A component that installs another qdisc adds it here, needed for what asks for it.
QDISCS: tuple[QdiscNeed, ...] = (
    QdiscNeed("sch_netem", "netem delay 1ms", "native"),
    QdiscNeed("sch_fq", "fq", "capture"),
    # link.aqm (cctest/model/aqm.py): the shaper under an AQM, and the AQMs themselves
    QdiscNeed(aqm.SHAPER_MODULE, aqm.SHAPER_PROBE, "aqm"),
    *(QdiscNeed(a.module, a.probe, "aqm") for a in aqm.REGISTRY.values() if a.module and a.probe),
)


def probe_qdisc(spec: str) -> bool:
    ns = f"{DOCTOR_NS_PREFIX}{uuid.uuid4().hex[:8]}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        return False
    try:
        cmd = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root"] + spec.split()
        return subprocess.run(cmd, capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _tool(name: str, package: str, needed_for: str = "native") -> Check:
    path = which(name)
    return Check(name, path is not None, path or "not found", f"apt-get install {package}", needed_for)


def module_loading() -> Check:
    disabled = Path("/proc/sys/kernel/modules_disabled")
    if not Path("/proc/modules").exists():
        return Check("module loading", False, "kernel built without loadable modules (no /proc/modules)",
                     "use --vm (a stock distro kernel in virtme-ng)", "modules")
    if disabled.exists() and disabled.read_text().strip() == "1":
        return Check("module loading", False, "kernel.modules_disabled=1", "reboot with modules enabled", "modules")
    return Check("module loading", True, "ok", needed_for="modules")


def mininet() -> Check:
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return Check("mininet", False, "python module not importable",
                     "apt-get install mininet bridge-utils; use a venv made with --system-site-packages")
    missing = [t for t in ("mnexec", "brctl") if not which(t)]
    if missing:
        return Check("mininet", False, f"{', '.join(missing)} not found", "apt-get install mininet bridge-utils")
    return Check("mininet", True, f"mininet {mininet_version()}")


def mininet_version() -> str:
    from mininet.net import VERSION

    return VERSION


def run_cgroup() -> Check:
    """Whether a run can have its cgroup (host/cgroup.py), which `cctest clean` kills after a SIGKILL."""
    from ..host.cgroup import cgroup2_mount, unavailable_reason

    reason = unavailable_reason()
    return Check("cgroup v2", reason is None,
                 f"each run gets one under {cgroup2_mount()}" if reason is None else reason,
                 "optional: without it, `cctest clean` after a SIGKILL finds only the processes the journal names",
                 "optional")


CGROUP_ENGINES = ("libpod", "docker", "containerd", "kubepods", "lxc")


def container_engine(root: Path = Path("/"), environ: Mapping[str, str] | None = None) -> str | None:
    """The container engine this process runs under, or None on a host or in a VM.

    Looked up in this order: podman's /run/.containerenv; the `container` variable (podman, LXC,
    systemd-nspawn set it); the process's own cgroup path (not PID 1's, which is the host's init
    under --pid host); docker's /.dockerenv, believed only when the root filesystem is not a block
    device, because VM images made from container images keep that file on their ext4 root.
    """
    environ = os.environ if environ is None else environ
    if (root / "run/.containerenv").exists():
        return "podman"
    if environ.get("container"):
        return environ["container"]
    try:
        cgroups = (root / "proc/self/cgroup").read_text()
    except OSError:
        cgroups = ""
    for line in cgroups.splitlines():
        path = line.split(":", 2)[-1]
        engine = next((e for e in CGROUP_ENGINES if e in path), None)
        if engine:
            return "podman" if engine == "libpod" else engine
    if (root / ".dockerenv").exists() and not _root_is_block_device(root):
        return "docker"
    return None


def _root_is_block_device(root: Path) -> bool:
    try:
        mounts = (root / "proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    # mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPEROPTIONS
    sources = [line.split(" - ", 1)[1].split()[1] for line in mounts
               if len(line.split()) > 4 and line.split()[4] == "/" and " - " in line]
    return bool(sources) and sources[-1].startswith("/dev/")


def container_note(engine: str, release: str) -> str:
    """What a run inside a container can and cannot do, in one plain sentence."""
    return (f"inside a {engine} container: it has no kernel of its own and drives the host's ({release}), "
            "so native runs need a capable HOST kernel (the qdisc and module checks below are that kernel's) "
            "and the container needs --privileged --network host --pid host with the host's /lib/modules and "
            "/usr/src mounted (docs/docker.md)")


def checks() -> list[Check]:
    root = os.geteuid() == 0
    result = [Check("root", root, "uid 0" if root else f"uid {os.geteuid()}", "run as root (sudo)")]
    engine = container_engine()
    if engine:
        result.append(Check("container", True, container_note(engine, platform.release())))
    for qdisc in QDISCS:
        if root:
            ok = probe_qdisc(qdisc.spec)
            result.append(Check(qdisc.module, ok, "works" if ok else "cannot be created on this kernel",
                                "use --vm, or a kernel with this qdisc", qdisc.needed_for))
        else:
            result.append(Check(qdisc.module, False, "unknown (probing needs root)", "run cctest doctor as root",
                                qdisc.needed_for))
    result.append(module_loading())
    result.append(run_cgroup())
    release = platform.release()
    has_headers = (headers_dir(release) / "Makefile").exists()
    result.append(Check("kernel headers", has_headers,
                        f"{headers_dir(release)}" if has_headers else f"none for {release}",
                        f"apt-get install linux-headers-{release}", "modules"))
    result.append(mininet())
    for name, package, needed_for in (("iperf3", "iperf3", "native"), ("tc", "iproute2", "native"),
                                      ("ss", "iproute2", "native"), ("ethtool", "ethtool", "native"),
                                      ("ping", "iputils-ping", "native"), ("tcpdump", "tcpdump", "capture"),
                                      ("bpftrace", "bpftrace", "capture")):
        result.append(_tool(name, package, needed_for))
    from ..host.captures.base import pyroute2_installed

    sampling = pyroute2_installed()
    result.append(Check("pyroute2", sampling, "installed (ss and qdisc sampling)" if sampling else "not installed",
                        "pip install 'cctest[run]'", "native"))
    result.append(_tool("qemu-system-x86_64", "qemu-system-x86", "vm"))
    vng = which("vng")
    result.append(Check("vng", vng is not None, vng or "not found", "pip install 'cctest[run]' (virtme-ng)", "vm"))
    kvm = os.access("/dev/kvm", os.R_OK | os.W_OK)
    seen = "/dev/kvm present (used only with --kvm)" if kvm else "no /dev/kvm (software emulation is used)"
    result.append(Check("kvm", kvm, seen,
                        "optional: cctest uses software emulation unless --kvm is given", "optional"))
    kernels = stock_kernels()
    result.append(Check("stock kernel for --vm", bool(kernels), str(kernels[0]) if kernels else "no /boot/vmlinuz-*",
                        "apt-get install linux-image-amd64 linux-headers-amd64", "vm"))
    if kernels:
        vm_release = release_of_kernel_image(kernels[0])
        ok = (headers_dir(vm_release) / "Makefile").exists()
        result.append(Check("headers for the VM kernel", ok, vm_release, f"apt-get install linux-headers-{vm_release}",
                            "vm"))
    result += uml_checks()
    return result


def uml_checks() -> list[Check]:
    """What `--vm --engine uml` needs: its own kernel build (cached per source version, config
    fragment and patches), busybox (its init powers off with it), taskset (each instance is pinned
    to a CPU), setarch (it boots without address-space randomisation)."""
    from ..emulation import umlkernel

    try:
        series = umlkernel.series()
    except umlkernel.UMLKernelError as e:
        return [Check("UML kernel", False, str(e), f"unset {umlkernel.SERIES_VAR} (6.1) or set it to a known series",
                      "uml")]
    version = umlkernel.source_version(series)
    build = umlkernel.find()
    if build is not None:
        kernel = Check("UML kernel", True, f"{build.release} from {series.package} {build.version}, config "
                       f"fragment and patches sha256 {build.inputs_sha256[:umlkernel.HASH_CHARS]}, "
                       f"cached at {build.dir}", needed_for="uml")
    else:
        why = (f"{series.package} not installed" if version is None else
               f"not built for {series.package} {version} with config fragment and patches "
               f"sha256 {umlkernel.inputs_sha256(patches=series.patches)[:umlkernel.HASH_CHARS]} "
               f"(cache: {umlkernel.cache_root()})")
        build_cmd = ("scripts/uml-kernel.sh" if series.name == umlkernel.DEFAULT_SERIES
                     else f"{umlkernel.SERIES_VAR}={series.name} scripts/uml-kernel.sh")
        kernel = Check("UML kernel", False, why, f"{build_cmd} (about 10 min on 2 cores)", "uml")
    result = [kernel]
    for name, package in (("busybox", "busybox-static"), ("taskset", "util-linux"), ("setarch", "util-linux")):
        result.append(_tool(name, package, "uml"))
    return result


def vm_clock_verdict(results: list[Check]) -> str:
    """Which engine and clock a --vm run gets by default (`--engine auto`), and why."""
    uml_ready = all(c.ok for c in results if c.needed_for == "uml")
    if uml_ready:
        return ("Its engine: uml (`--engine auto`: this project's User-Mode Linux kernel is built; it agrees with "
                "QEMU within run-to-run spread at 3-5x less cost, docs/uml.md), on its time-travel clock: guest "
                "time advances only through timers, so a busy host makes a run take longer, not come out "
                "different. `--engine qemu` boots the stock distro kernel on QEMU's instruction counter instead.")
    return (f"Its engine: qemu (`--engine auto`; the UML engine's kernel is not built: scripts/uml-kernel.sh). "
            f"Its clock: {VMClock().describe()}, so the emulated link keeps its configured rate however "
            "slow or busy this host is (a run takes longer, it does not come out different); "
            "`--clock wall` or `--kvm` use the host's clock instead, on which software emulation falls behind "
            "its timers by however much the host's load says (paths 2-5.5 % longer than configured on an idle "
            "host, a 20 Mbit/s link delivering 82 % of its rate: docs/virtual-clock.md).")


def native_problems(results: list[Check], needs_modules: bool) -> list[Check]:
    wanted = {"native"} | ({"modules"} if needs_modules else set())
    return [c for c in results if not c.ok and c.needed_for in wanted]


def vm_problems(results: list[Check]) -> list[Check]:
    return [c for c in results if not c.ok and c.needed_for == "vm"]


def verdict(results: list[Check]) -> str:
    container = next((c for c in results if c.name == "container"), None)
    said = _verdict(results)
    return f"{said.rstrip('.')}. Note: {container.detail}." if container else said


def _verdict(results: list[Check]) -> str:
    native = native_problems(results, needs_modules=True)
    if not native:
        return "native: this host can run every scenario itself (the default)"
    why = "; ".join(f"{c.name}: {c.detail}" for c in native)
    if not vm_problems(results):
        return f"vm: runs go to a VM because the host lacks {why}. " + vm_clock_verdict(results)
    return f"none: the host lacks {why}, and the VM path lacks " + "; ".join(
        f"{c.name} ({c.fix})" for c in vm_problems(results))
