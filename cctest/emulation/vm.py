"""Run cctest inside a throwaway virtme-ng VM booted on a stock distro kernel.

The guest sees the host's files read-only (so the same venv and checkout), gets the output
directory as a writable share, and runs `cctest run --native` inside. Modules are built on the
host against the guest kernel's headers before boot. Tables are made on the host afterwards:
parsing under software emulation is slow (docs/emulation.md).

The clock. Under software emulation on the wall clock the guest falls behind its own timers (a
20 Mbit/s link delivered 82 %). On QEMU's instruction-counted clock (`-icount shift=N,sleep=off`)
guest time advances 2**N ns per instruction executed and jumps over idle time, so the guest's
network runs at its configured rate in guest time however slow or busy the host is: a slow host
makes a run take longer, not come out different. icount needs a single vCPU (with two, the guest
did not finish booting in 300 s) and cannot be combined with KVM (docs/virtual-clock.md).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..base.errors import BadInput, CctestError
from ..base.safeload import Refused, read_bounded
from ..kernel.kmod import REPO_ROOT, ModuleError, release_of_kernel_image
from .umlshare import SYSTEM_PATH

MAX_KERNEL_BYTES = 256 << 20  # a bzImage is ~10 MB

# Drivers that probe slowly under emulation and that no run needs (docs/emulation.md: boot 28 s -> 18 s).
# Then the CPU's crypto accelerators, which udev loads at boot: each waits for its self-test on a
# kernel timer, and on the virtual clock the idle guest's time jumps (9p reads of a loaded host) can
# expire it: a WARNING in crypto_wait_for_test (guest time 1935 -> 2115 s in one boot), before any
# run. Nothing a run does encrypts.
BLACKLIST = ("kvm", "kvm_intel", "kvm_amd", "ahci", "libahci", "libata", "ata_piix", "sr_mod", "cdrom",
             "psmouse", "floppy", "parport", "parport_pc", "snd", "soundcore", "pcspkr", "qat_4xxx",
             "aesni_intel", "ghash_clmulni_intel", "polyval_clmulni", "sha1_ssse3", "sha256_ssse3",
             "sha512_ssse3", "crc32_pclmul", "crct10dif_pclmul")

CLOCKS = ("virtual", "wall")
# 1 ns per instruction: the fastest guest CPU icount offers; bench/vm_clock.py measured shift 1
# (a CPU half as fast) against it (docs/virtual-clock.md).
DEFAULT_ICOUNT_SHIFT = 0
MAX_ICOUNT_SHIFT = 10  # QEMU's own upper bound
WALL_CLOCK_VCPUS = 2  # multi-threaded TCG: two vCPUs keep up better with a 10 Mbit/s link
# What QEMU boots with -kernel on x86: the boot protocol's "HdrS" signature at 0x202 marks an image.
BZIMAGE_MAGIC_AT, BZIMAGE_MAGIC = 0x202, b"HdrS"


class VMError(CctestError):
    pass


class VMOptionError(VMError, BadInput):
    """VM options that cannot work: a combination, or a --kernel that is no kernel image."""


@dataclass(frozen=True)
class VMClock:
    """How the guest keeps time: QEMU's instruction counter (virtual) or the host's (wall)."""

    kind: str = "virtual"
    shift: int = DEFAULT_ICOUNT_SHIFT
    kvm: bool = False

    def __post_init__(self) -> None:
        if self.kind not in CLOCKS:
            raise VMOptionError(f"--clock {self.kind}: allowed values are {', '.join(CLOCKS)}")
        if not 0 <= self.shift <= MAX_ICOUNT_SHIFT:
            raise VMOptionError(f"--icount-shift {self.shift}: allowed values are 0 to {MAX_ICOUNT_SHIFT}")
        if self.kvm and self.kind == "virtual":
            raise VMOptionError("--kvm runs on the wall clock: QEMU's instruction counter needs software "
                                "emulation; use --kvm --clock wall, or drop --kvm")

    @classmethod
    def choose(cls, clock: str | None, shift: int | None, kvm: bool) -> VMClock:
        """--clock defaults to virtual, except with --kvm, which keeps the wall clock."""
        kind = clock or ("wall" if kvm else "virtual")
        return cls(kind, DEFAULT_ICOUNT_SHIFT if shift is None else shift, kvm)

    @property
    def vcpus(self) -> int:
        return 1 if self.kind == "virtual" else WALL_CLOCK_VCPUS

    def qemu_opts(self) -> str | None:
        return f"-icount shift={self.shift},sleep=off" if self.kind == "virtual" else None

    def describe(self) -> str:
        if self.kind == "virtual":
            return (f"virtual clock (QEMU icount shift={self.shift}: {2 ** self.shift} ns per guest instruction, "
                    f"idle time skipped; {self.vcpus} vCPU)")
        return f"wall clock ({'KVM' if self.kvm else 'software emulation'}, {self.vcpus} vCPUs)"

    def env(self) -> dict[str, str]:
        """What the guest is told of its VM, for meta.json's `vm` object."""
        return {"CCTEST_VM_CLOCK": self.kind,
                "CCTEST_VM_ICOUNT_SHIFT": str(self.shift) if self.kind == "virtual" else "",
                "CCTEST_VM_VCPUS": str(self.vcpus), "CCTEST_VM_KVM": "1" if self.kvm else "0"}


def stock_kernels() -> list[Path]:
    """Kernel images for --vm, the default first: the distro's current kernel, else the newest."""
    return order_kernels(list(Path("/boot").glob("vmlinuz-*")), distro_default_image())


def order_kernels(images: list[Path], default: str | None) -> list[Path]:
    """`default` (an image file name) first, then newest first by mtime. mtime alone is not
    enough: package installs keep the build date, so a second kernel pulled in for its headers
    could win or lose by a day and change what the VM tests boot."""
    return sorted(images, key=lambda p: (p.name != default, -p.stat().st_mtime))


def distro_default_image() -> str | None:
    """vmlinuz name of the kernel Debian's linux-image-amd64 metapackage depends on, if any."""
    try:
        depends = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", "linux-image-amd64"],
                                 capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    package = depends.split(" ", 1)[0].strip(",")
    return package.replace("linux-image-", "vmlinuz-", 1) if package.startswith("linux-image-") else None


def pick_kernel(kernel: str | None) -> Path:
    """The image --vm boots: --kernel's, once it proved to be one, else the distro's default."""
    if kernel:
        return checked_kernel(kernel)
    kernels = stock_kernels()
    if not kernels:
        raise VMError("no stock kernel in /boot for --vm; apt-get install linux-image-amd64 linux-headers-amd64")
    return kernels[0]


def checked_kernel(kernel: str) -> Path:
    """--kernel's image, or bad input naming what is wrong with it and the kernels there are."""
    path = Path(kernel)
    try:  # a regular file only: open() of a FIFO waits for a writer forever
        header = read_bounded(path, MAX_KERNEL_BYTES, "a kernel image")[:BZIMAGE_MAGIC_AT + len(BZIMAGE_MAGIC)]
    except Refused as error:
        raise VMOptionError(f"--kernel {kernel}: {str(error).lower()}; {_kernels_here()}") from None
    if header[BZIMAGE_MAGIC_AT:] != BZIMAGE_MAGIC:
        raise VMOptionError(f"--kernel {kernel}: not a bootable kernel image (no x86 boot header); {_kernels_here()}")
    try:
        release_of_kernel_image(path)
    except ModuleError:
        raise VMOptionError(f"--kernel {kernel}: its kernel release cannot be told (the modules are built for "
                            "it): name the file vmlinuz-<release>") from None
    return path


def _kernels_here() -> str:
    kernels = stock_kernels()
    return ("give a kernel image: " + ", ".join(map(str, kernels)) if kernels
            else "give a kernel image, e.g. from apt-get install linux-image-amd64")


def vng_path() -> str:
    found = shutil.which("vng") or str(Path(sys.executable).with_name("vng"))
    if not os.path.exists(found):
        raise VMError("virtme-ng (vng) not found; pip install virtme-ng")
    return found


def vng_command(kernel: Path, guest_cmd: list[str], rwdirs: list[Path], clock: VMClock = VMClock(),
                memory: str = "2G", guest_env: dict[str, str] | None = None,
                command_file: Path | None = None) -> list[str]:
    """vng's command line. With `command_file` (on a share the guest sees at the same path) the guest's
    command goes there and the kernel command line only names it: vng passes --exec base64-encoded on
    the kernel command line, which x86 cuts at 2048 bytes, and a cut command never runs (the guest
    idles until killed: a sweep of ~30 scenarios did)."""
    cmd = [vng_path(), "--force-9p", "-r", str(kernel), "--cpus", str(clock.vcpus), "-m", memory,
           "--append", "modprobe.blacklist=" + ",".join(BLACKLIST)]
    if not clock.kvm:
        cmd.insert(1, "--disable-kvm")
    qemu_opts = clock.qemu_opts()
    if qemu_opts:
        cmd += ["--qemu-opts", qemu_opts]
    for rwdir in rwdirs:
        cmd += ["--rwdir", str(rwdir)]
    env = {"PATH": guest_path(), **clock.env(), **(guest_env or {})}
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    line = f"cd {shlex.quote(str(REPO_ROOT))} && {assignments} " + shlex.join(guest_cmd)
    if command_file is not None:
        command_file.write_text(line + "\n")
        line = f"sh {shlex.quote(str(command_file))}"
    cmd += ["--exec", line]
    return cmd


def guest_path() -> str:
    """The guest's PATH: the venv first (so `vng`'s helpers and our console script resolve), then the system's."""
    return f"{Path(sys.executable).parent}:{SYSTEM_PATH}"


# Mininet imports distutils, which a venv's setuptools shim answers with all of setuptools and
# pkg_resources: 0.7 host s of a UML guest's start. Python 3.11's own distutils serves it.
GUEST_PYTHON_ENV = {"SETUPTOOLS_USE_DISTUTILS": "stdlib"}


def precompile_package() -> None:
    """Write the bytecode of cctest's own modules before guests boot: a guest's root is read-only, so
    a module the host never imported (the runner, the captures) was compiled from source in every
    guest, 0.45 host s of a UML guest's start. Quietly nothing where the package is not writable."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1]), quiet=2)


def host_clock_env(share: Path | PurePosixPath) -> dict[str, str]:
    """Lets the guest read the host's wall clock (cctest.host.vmtime) through a file on a writable share,
    and say how long the boot took on it."""
    return {"CCTEST_HOST_CLOCK_FILE": str(share / ".host-clock"), "CCTEST_VM_BOOT_STARTED": f"{time.time():.3f}"}


class GuestProcess(subprocess.Popen):
    """vng's process, and the file stop() touches to ask its guest's run to end (None: no share)."""

    stop_file: Path | None = None


def start(kernel: Path, guest_cmd: list[str], rwdirs: list[Path], clock: VMClock = VMClock(),
          log: Path | None = None, extra_env: dict[str, str] | None = None) -> GuestProcess:
    """Boot a VM that runs guest_cmd and powers off. With `log`, its console goes there (VMs in
    parallel), else to this terminal. `extra_env`: more variables for the guest's command."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    guest_env = host_clock_env(rwdirs[0]) if rwdirs else {}
    guest_env.update(GUEST_PYTHON_ENV)
    guest_env.update(extra_env or {})
    command_file: Path | None = None
    if rwdirs:  # one file per VM: VMs in parallel share one output directory
        fd, name = tempfile.mkstemp(prefix=".guest-command-", suffix=".sh", dir=rwdirs[0])
        os.close(fd)
        command_file = Path(name)
    stop_file = None
    if command_file is not None:  # how stop() asks the guest's run to end as on Ctrl-C (watch_stop_file, in the guest)
        stop_file = rwdirs[0] / f".stop-{os.getpid()}-{command_file.stem}"
        stop_file.unlink(missing_ok=True)
        guest_env[STOP_FILE_ENV] = str(stop_file)
    cmd = vng_command(kernel, guest_cmd, rwdirs, clock, guest_env=guest_env, command_file=command_file)
    if log is None:
        proc = GuestProcess(cmd, env=env, cwd=REPO_ROOT)
    else:
        with open(log, "wb") as sink:
            # no terminal: vng must not wait on (or fight over) a shared stdin. Its own session: a
            # Ctrl-C on our terminal reaches only cctest, which asks each guest to end (stop()),
            # instead of killing QEMU under a run that then keeps nothing.
            proc = GuestProcess(cmd, env=env, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    proc.stop_file = stop_file
    return proc


def run(kernel: Path, guest_cmd: list[str], rwdirs: list[Path], clock: VMClock = VMClock(),
        log: Path | None = None) -> int:
    """Boot, run guest_cmd, power off. Returns the guest command's exit code."""
    proc = start(kernel, guest_cmd, rwdirs, clock, log)
    try:
        return proc.wait()
    except BaseException:
        stop(proc)
        raise


def stop(proc: subprocess.Popen, grace_s: float = 120.0) -> None:
    """Ask the guest's run to end as on Ctrl-C (a VM on our terminal also gets the Ctrl-C itself): it
    tears down, keeps what was measured and powers off. Give it time (teardown under emulation takes
    a minute), then end qemu (its whole session)."""
    stop_file = getattr(proc, "stop_file", None)
    try:
        if stop_file is not None and proc.poll() is None:
            stop_file.touch()
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_session(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_session(proc, signal.SIGKILL)
            proc.wait()
    except BaseException:  # a second Ctrl-C: QEMU, in its own session, must not outlive us
        _signal_session(proc, signal.SIGKILL)
        raise
    finally:
        if stop_file is not None:
            stop_file.unlink(missing_ok=True)


def _signal_session(proc: subprocess.Popen, sig: int) -> None:
    try:
        if os.getpgid(proc.pid) == proc.pid:  # started in its own session: qemu is in its group
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except ProcessLookupError:
        pass


STOP_FILE_ENV = "CCTEST_STOP_FILE"


def watch_stop_file(poll_s: float = 0.5) -> None:
    """In the guest: when the host's stop() creates the stop file, interrupt this process as Ctrl-C
    would (its run tears down, keeps what was measured and is marked interrupted)."""
    path = os.environ.get(STOP_FILE_ENV)
    if not path:
        return
    # The interrupt is this process's own SIGINT: it must reach Python even where a shell started
    # the guest's command as a background job, with SIGINT ignored (called from the main thread).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch() -> None:
        while not os.path.exists(path):
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="stop-file", daemon=True).start()


# A guest kernel's report of its own failure, as its console prints it (the line after the
# timestamp): the first such line names the crash.
OOPS = re.compile(r"^\[\s*\d+\.\d+\]\s+((?:BUG|Oops|Kernel panic - not syncing|general protection fault|kernel BUG at|"
                  r"WARNING: CPU|Unable to handle kernel)\b.*)$", re.M)


def guest_crash(console: str) -> str | None:
    """The line of the first oops, panic, BUG or WARNING in a guest console, or None."""
    match = OOPS.search(console)
    return match.group(1).strip() if match else None
