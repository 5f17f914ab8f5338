"""Build, load and unload the congestion-control modules under modules/.

Every directory under modules/ with a Kbuild file is one external-module tree; each `<name>.ko`
it builds provides the congestion control `<name>`. Trees are copied to
build/modules/<kernel release>/ and built there with the target kernel's headers, so the checkout
stays clean and a VM (which sees the checkout read-only) can insmod what the host built.
Kernel-shipped controls (bbr, htcp, ...) are loaded with modprobe when not built in.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .scenario import KERNEL_CCS, PROJECT_CCS

REPO_ROOT = Path(__file__).resolve().parent.parent
MODULES_DIR = REPO_ROOT / "modules"
BUILD_DIR = REPO_ROOT / "build" / "modules"
AVAILABLE_CCS = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class ModuleError(Exception):
    """A one-line, user-facing module problem."""


@dataclass
class LoadedModule:
    name: str
    params: dict[str, int]
    path: str | None
    sha256: str | None
    loaded_by_us: bool
    effective_params: dict[str, str] = field(default_factory=dict)

    def as_meta(self) -> dict:
        return {
            "name": self.name,
            "params": self.params,
            "effective_params": self.effective_params,
            "path": self.path,
            "sha256": self.sha256,
            "loaded_by_cctest": self.loaded_by_us,
        }


def headers_dir(release: str) -> Path:
    return Path("/lib/modules") / release / "build"


def source_trees() -> list[Path]:
    return sorted(p.parent for p in MODULES_DIR.glob("*/Kbuild"))


def _tree_digest(tree: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(tree.rglob("*")):
        if path.is_file() and (path.suffix in {".c", ".h"} or path.name in {"Kbuild", "Makefile"}):
            digest.update(path.relative_to(tree).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def build(release: str, verbose: bool = False) -> dict[str, Path]:
    """Build every module tree for `release`; return {cc name: .ko path}. Rebuilds only on change."""
    kdir = headers_dir(release)
    if not (kdir / "Makefile").exists():
        raise ModuleError(
            f"kernel headers for {release} not found at {kdir}; install them "
            f"(Debian/Ubuntu: apt-get install linux-headers-{release})"
        )
    built: dict[str, Path] = {}
    for tree in source_trees():
        out = BUILD_DIR / release / tree.name
        stamp = out / ".cctest-source-digest"
        digest = _tree_digest(tree)
        if not (stamp.exists() and stamp.read_text() == digest and any(out.glob("*.ko"))):
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(tree, out)
            result = subprocess.run(
                ["make", "-C", str(kdir), f"M={out}", "modules"],
                capture_output=True, text=True,
            )
            if verbose or result.returncode != 0:
                print(result.stdout + result.stderr)
            if result.returncode != 0:
                last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise ModuleError(f"building modules/{tree.name} for {release} failed: {last}")
            stamp.write_text(digest)
        for ko in out.glob("*.ko"):
            built[ko.stem] = ko
    return built


def built_modules(release: str) -> dict[str, Path]:
    return {ko.stem: ko for ko in (BUILD_DIR / release).glob("*/*.ko")}


def module_parameters(ko: Path) -> list[str]:
    out = subprocess.run(["modinfo", "-F", "parm", str(ko)], capture_output=True, text=True).stdout
    return [line.split(":", 1)[0] for line in out.splitlines() if line.strip()]


def check_params(cc: str, params: dict[str, int], release: str) -> None:
    """Fail before any side effect when a scenario names a parameter the module lacks."""
    if not params:
        return
    if cc in KERNEL_CCS:
        raise ModuleError(f"flow params are only for this project's modules; {cc} is the kernel's own")
    ko = built_modules(release).get(cc)
    if ko is None:
        return  # not built yet: checked again at load time
    allowed = module_parameters(ko)
    for name in params:
        if name not in allowed:
            raise ModuleError(f"module {cc} has no parameter {name!r}; allowed: {', '.join(allowed) or '(none)'}")


def available_ccs() -> set[str]:
    try:
        return set(AVAILABLE_CCS.read_text().split())
    except OSError:
        return set()


def is_loaded(name: str) -> bool:
    return Path("/sys/module", name).exists()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_params(name: str) -> dict[str, str]:
    pdir = Path("/sys/module", name, "parameters")
    if not pdir.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in sorted(pdir.iterdir())}


def load(cc: str, params: dict[str, int], release: str, on_loaded=None) -> LoadedModule:
    """Make `cc` available with `params`. on_loaded(name) is called before insmod (for the journal)."""
    if cc in PROJECT_CCS:
        ko = built_modules(release).get(cc)
        if ko is None:
            raise ModuleError(
                f"no built module for {cc} (kernel {release}); run `cctest modules build` "
                "(are its sources under modules/?)"
            )
        check_params(cc, params, release)
        if is_loaded(cc):
            current = read_params(cc)
            wanted = {k: str(v) for k, v in params.items()}
            if any(current.get(k) != v for k, v in wanted.items()):
                raise ModuleError(
                    f"module {cc} is already loaded with other parameters {current}; "
                    f"unload it first: cctest modules unload {cc}"
                )
            return LoadedModule(cc, params, str(ko), sha256_of(ko), False, current)
        if on_loaded:
            on_loaded(cc)
        args = ["insmod", str(ko)] + [f"{k}={v}" for k, v in params.items()]
        result = subprocess.run(args, capture_output=True, text=True)
        if result.returncode != 0:
            raise ModuleError(f"insmod {ko.name} failed: {result.stderr.strip()}")
        return LoadedModule(cc, params, str(ko), sha256_of(ko), True, read_params(cc))
    # A kernel congestion control: built in, already loaded, or tcp_<cc>.ko.
    if cc in available_ccs():
        return LoadedModule(cc, {}, None, None, False, read_params(f"tcp_{cc}"))
    module = f"tcp_{cc}"
    if on_loaded:
        on_loaded(module)
    result = subprocess.run(["modprobe", module], capture_output=True, text=True)
    if result.returncode != 0:
        raise ModuleError(f"congestion control {cc} is not available and `modprobe {module}` failed: {result.stderr.strip()}")
    path = subprocess.run(["modinfo", "-n", module], capture_output=True, text=True).stdout.strip()
    digest = sha256_of(Path(path)) if path and os.path.exists(path) else None
    return LoadedModule(cc, {}, path or None, digest, True, read_params(module))


def module_name(loaded: LoadedModule) -> str:
    return loaded.name if loaded.name in PROJECT_CCS else f"tcp_{loaded.name}"


def unload(name: str, attempts: int = 10) -> None:
    """rmmod, retrying briefly: sockets of a just-destroyed namespace release the module late."""
    for _ in range(attempts):
        result = subprocess.run(["rmmod", name], capture_output=True, text=True)
        if result.returncode == 0 or not is_loaded(name):
            return
        time.sleep(0.5)
    raise ModuleError(f"rmmod {name} failed: {result.stderr.strip()}")


def release_of_kernel_image(image: Path) -> str:
    """Kernel release of a vmlinuz image, from its name or, failing that, its header string."""
    match = re.match(r"vmlinuz-(.+)$", image.name)
    if match:
        return match.group(1)
    data = image.read_bytes()[:0x10000]
    found = re.search(rb"(\d+\.\d+\.\d+[^\s\x00]*) \(", data)
    if found:
        return found.group(1).decode()
    raise ModuleError(f"cannot tell the kernel release of {image}; name it vmlinuz-<release>")
