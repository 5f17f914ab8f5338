"""Run cctest inside a throwaway virtme-ng VM booted on a stock distro kernel.

The guest sees the host's files read-only (so the same venv and checkout), gets the output
directory as a writable share, and runs `cctest run --native` inside. Modules are built on the
host against the guest kernel's headers before boot. Tables are made on the host afterwards:
parsing under software emulation is slow (ENVIRONMENT.md).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .doctor import stock_kernels
from .kmod import REPO_ROOT, release_of_kernel_image

# Drivers that probe slowly under emulation and that no run needs (ENVIRONMENT.md: 28 s -> 18 s).
BLACKLIST = ("kvm", "kvm_intel", "kvm_amd", "ahci", "libahci", "libata", "ata_piix", "sr_mod", "cdrom",
             "psmouse", "floppy", "parport", "parport_pc", "snd", "soundcore", "pcspkr", "qat_4xxx")


class VMError(Exception):
    pass


def pick_kernel(kernel: str | None) -> Path:
    if kernel:
        path = Path(kernel)
        if not path.is_file():
            raise VMError(f"--kernel {kernel}: no such kernel image")
        return path
    kernels = stock_kernels()
    if not kernels:
        raise VMError("no stock kernel in /boot for --vm; apt-get install linux-image-amd64 linux-headers-amd64")
    return kernels[0]


def vng_path() -> str:
    found = shutil.which("vng") or str(Path(sys.executable).with_name("vng"))
    if not os.path.exists(found):
        raise VMError("virtme-ng (vng) not found; pip install virtme-ng")
    return found


def vng_command(kernel: Path, guest_cmd: list[str], rwdirs: list[Path], cpus: int = 2, memory: str = "2G",
                kvm: bool = False) -> list[str]:
    cmd = [vng_path(), "--force-9p", "-r", str(kernel), "--cpus", str(cpus), "-m", memory,
           "--append", "modprobe.blacklist=" + ",".join(BLACKLIST)]
    if not kvm:
        cmd.insert(1, "--disable-kvm")
    for rwdir in rwdirs:
        cmd += ["--rwdir", str(rwdir)]
    # PATH: the venv first (so `vng`'s helpers and our console script resolve), then the system's.
    env_path = f"{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    cmd += ["--exec", f"cd {shlex.quote(str(REPO_ROOT))} && PATH={env_path} " + shlex.join(guest_cmd)]
    return cmd


def run(kernel: Path, guest_cmd: list[str], rwdirs: list[Path], kvm: bool = False) -> int:
    """Boot, run guest_cmd, power off. Returns the guest command's exit code."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    proc = subprocess.run(vng_command(kernel, guest_cmd, rwdirs, kvm=kvm), env=env, cwd=REPO_ROOT)
    return proc.returncode


def guest_release(kernel: Path) -> str:
    return release_of_kernel_image(kernel)
