"""Build, load and unload the congestion-control modules under modules/.

Every directory under modules/ with a Kbuild file is one external-module tree; each `<name>.ko`
it builds provides the congestion control `<name>`; modules/common holds headers every tree
includes. Trees are copied to build/modules/<kernel release>/ (modules/common beside them) and
built there with the target kernel's headers, so the checkout stays clean and a VM (which sees the
checkout read-only) can insmod what the host built.
Kernel-shipped controls (bbr, htcp, ...) are loaded with modprobe when not built in.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..base import filelock
from ..base.errors import BadInput, CctestError
from . import projectccs
from .modparams import ParamSpec, param_problem
from .modsource import declared
from .projectccs import KERNEL_CCS as KERNEL_CCS, PROJECT_CCS as PROJECT_CCS  # kmod's too

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULES_DIR = projectccs.MODULES_DIR
BUILD_DIR = projectccs.build_dir()  # build/modules in a checkout, else the user's cache (projectccs.py)
AVAILABLE_CCS = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class ModuleError(CctestError):
    """A one-line, user-facing module problem."""


class BadParameter(ModuleError, BadInput):
    """A scenario gave a module a parameter it does not have or a value outside its range: bad input."""


@dataclass
class LoadedModule:
    name: str
    params: dict[str, int]
    path: str | None
    sha256: str | None
    loaded_by_us: bool
    effective_params: dict[str, str] = field(default_factory=dict)
    description: str | None = None  # the module's own (modinfo): e.g. which constants bbr3 uses

    def as_meta(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
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


def _tree_inputs(tree: Path) -> list[Path]:
    """The source files a build of `tree` reads: its own and the shared headers of modules/common
    (its Kbuild: -I$(src)/../common)."""
    common = tree.parent / projectccs.COMMON
    folders = [tree, common] if common.is_dir() else [tree]
    return [path for folder in folders for path in sorted(folder.rglob("*"))
            if path.is_file() and (path.suffix in {".c", ".h"} or path.name in {"Kbuild", "Makefile"})]


def _tree_digest(tree: Path) -> str:
    digest = hashlib.sha256()
    for path in _tree_inputs(tree):
        digest.update(path.relative_to(tree.parent).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def stage_tree(tree: Path, out: Path) -> None:
    """Copy module tree `tree` to `out` for a build there, with modules/common beside it (out/../common)
    as the tree's Kbuild expects."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(tree, out)
    common = tree.parent / projectccs.COMMON
    if common.is_dir():
        shutil.rmtree(out.parent / projectccs.COMMON, ignore_errors=True)
        shutil.copytree(common, out.parent / projectccs.COMMON)


def build(release: str, verbose: bool = False, kdir: Path | None = None,
          make_vars: tuple[str, ...] = ()) -> dict[str, Path]:
    """Build every module tree for `release`; return {cc name: .ko path}. Rebuilds only on change."""
    with using_build(release, verbose, kdir, make_vars) as built:
        return built


@contextlib.contextmanager
def using_build(release: str, verbose: bool = False, kdir: Path | None = None,
                make_vars: tuple[str, ...] = ()) -> Iterator[dict[str, Path]]:
    """Build (if a source changed) and keep the build for `release` from being rebuilt while the
    caller uses it (a --vm session's guests load the .ko files from it): a shared lock, exclusive
    while building. So two cctest processes never build into one directory at once, and a rebuild
    waits for the sessions using the current build; each wait says so in one line.
    `kdir`: the kernel tree to build against (default: the distro's headers for `release`), with
    `make_vars` (the UML engine's tree: ARCH=um); a build against another tree is rebuilt."""
    lock = filelock.open_lock(BUILD_DIR / f"{release}.lock")
    try:
        filelock.take(lock, exclusive=False,
                      waiting=f"waiting for another cctest ({filelock.holder(lock)}) building the modules for "
                              f"{release}")
        if _stale_trees(release, kdir):
            filelock.take(lock, exclusive=True,
                          waiting=f"waiting to rebuild the modules for {release}: another cctest is running with "
                                  "the current build")
            # what changed meanwhile is rebuilt too: digests are checked again
            built = _build(release, verbose, kdir, make_vars)
            filelock.take(lock, exclusive=False)
        else:
            built = {ko.stem: ko for tree in source_trees() for ko in (BUILD_DIR / release / tree.name).glob("*.ko")}
        yield built
    finally:
        filelock.release(lock)


def _stale_trees(release: str, kdir: Path | None = None) -> list[Path]:
    return [tree for tree in source_trees() if not _is_built(tree, BUILD_DIR / release / tree.name, kdir)]


def _stamp(tree: Path, kdir: Path | None) -> str:
    """What a build is of: the sources' digest, and the tree built against when not the headers."""
    return _tree_digest(tree) + (f" {kdir}" if kdir is not None else "")


def _is_built(tree: Path, out: Path, kdir: Path | None = None) -> bool:
    stamp = out / ".cctest-source-digest"
    return stamp.exists() and stamp.read_text() == _stamp(tree, kdir) and any(out.glob("*.ko"))


def _build(release: str, verbose: bool, kdir: Path | None = None, make_vars: tuple[str, ...] = ()) -> dict[str, Path]:
    against = kdir
    kdir = kdir or headers_dir(release)
    if not (kdir / "Makefile").exists():
        raise ModuleError(
            f"kernel headers for {release} not found at {kdir}; install them "
            f"(Debian/Ubuntu: apt-get install linux-headers-{release})"
        )
    built: dict[str, Path] = {}
    for tree in source_trees():
        out = BUILD_DIR / release / tree.name
        stamp = out / ".cctest-source-digest"
        digest = _stamp(tree, against)
        if not _is_built(tree, out, against):
            stage_tree(tree, out)
            result = subprocess.run(
                ["make", *make_vars, "-C", str(kdir), f"M={out}", "modules"],
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


def param_specs(ko: Path) -> dict[str, ParamSpec]:
    """Every parameter of a built module with its allowed values, from its modinfo descriptions."""
    out = subprocess.run(["modinfo", "-F", "parm", str(ko)], capture_output=True, text=True).stdout
    specs: dict[str, ParamSpec] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        name, _, desc = line.partition(":")
        desc = re.sub(r"\s*\(\w+\)\s*$", "", desc)  # modinfo's "(uint)" type suffix of module_param
        specs[name] = ParamSpec.described(name, desc)
    return specs


def description_of(module: str) -> str | None:
    """A module's MODULE_DESCRIPTION (a .ko path or a module name), or None."""
    out = subprocess.run(["modinfo", "-F", "description", module], capture_output=True, text=True).stdout.strip()
    return out or None


def module_parameters(ko: Path) -> list[str]:
    return list(param_specs(ko))


def check_params(cc: str, params: dict[str, int], release: str, where: str = "") -> None:
    """Fail before any side effect when a scenario gives a module a parameter it lacks or a value
    outside the module's range. `where` names the scenario and flow key (prefix of the message)."""
    if not params:
        return
    prefix = f"{where}: " if where else ""
    if cc in KERNEL_CCS:
        raise BadParameter(f"{prefix}flow params are only for this project's modules; {cc} is the kernel's own")
    ko = built_modules(release).get(cc)
    if ko is None:  # not built yet: the sources' declarations (checked again at load time)
        found = declared(cc)
        if found is None:
            return
        specs = found.specs
    else:
        specs = param_specs(ko)
    for name, value in params.items():
        problem = param_problem(cc, specs, name, value)
        if problem:
            raise BadParameter(f"{prefix}{problem}")


def insmod(ko: Path, cc: str, params: dict[str, int], where: str = "") -> None:
    """insmod with parameters; a refused value (the module's range check: -EINVAL) is bad input."""
    result = subprocess.run(["insmod", str(ko)] + [f"{k}={v}" for k, v in params.items()],
                            capture_output=True, text=True)
    if result.returncode == 0:
        return
    stderr = " ".join(result.stderr.split())
    if "Invalid parameters" in stderr or "Invalid argument" in stderr:
        specs = param_specs(ko)
        problems = [p for p in (param_problem(cc, specs, k, v) for k, v in params.items()) if p]
        what = "; ".join(problems) or "parameters " + ", ".join(
            f"{k}={v} (allowed: {specs[k].allowed() if k in specs else 'no such parameter'})"
            for k, v in params.items())
        raise BadParameter(f"{where + ': ' if where else ''}module {cc} refused its parameters: {what}")
    raise ModuleError(f"insmod {ko.name} failed: {stderr}")


FALLBACK_COUNTER = "fallbacks"  # a module's count of sockets that ran its allocation-failure fallback


def fallback_count(name: str) -> int | None:
    """The module's fallback counter now, or None if it has none (or is not loaded)."""
    try:
        return int(Path("/sys/module", name, "parameters", FALLBACK_COUNTER).read_text())
    except (OSError, ValueError):
        return None


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


def load(cc: str, params: dict[str, int], release: str, on_loaded: Callable[[str], object] | None = None,
         where: str = "") -> LoadedModule:
    """Make `cc` available with `params`. on_loaded(name) is called before insmod (for the journal);
    `where` (scenario and flow key) prefixes a bad-parameter message."""
    if cc in PROJECT_CCS:
        ko = built_modules(release).get(cc)
        if ko is None:
            raise ModuleError(
                f"no built module for {cc} (kernel {release}); run `cctest modules build` "
                "(are its sources under modules/?)"
            )
        check_params(cc, params, release, where)
        if is_loaded(cc):
            current = read_params(cc)
            wanted = {k: str(v) for k, v in params.items()}
            if any(current.get(k) != v for k, v in wanted.items()):
                raise ModuleError(
                    f"module {cc} is already loaded with other parameters {current}; "
                    f"unload it first: cctest modules unload {cc}"
                )
            return LoadedModule(cc, params, str(ko), sha256_of(ko), False, current, description_of(str(ko)))
        if on_loaded:
            on_loaded(cc)
        insmod(ko, cc, params, where)
        return LoadedModule(cc, params, str(ko), sha256_of(ko), True, read_params(cc), description_of(str(ko)))
    # A kernel congestion control: built in, already loaded, or tcp_<cc>.ko.
    if cc in available_ccs():
        return LoadedModule(cc, {}, None, None, False, read_params(module_name(cc)))
    module = module_name(cc)
    if on_loaded:
        on_loaded(module)
    result = subprocess.run(["modprobe", module], capture_output=True, text=True)
    if result.returncode != 0:
        raise ModuleError(f"congestion control {cc} is not available and `modprobe {module}` failed: "
                          f"{result.stderr.strip()}")
    path = subprocess.run(["modinfo", "-n", module], capture_output=True, text=True).stdout.strip()
    digest = sha256_of(Path(path)) if path and os.path.exists(path) else None
    return LoadedModule(cc, {}, path or None, digest, True, read_params(module))


def module_name(cc: str) -> str:
    """The kernel module that provides congestion control `cc`: this project's by its own name, the
    kernel's as tcp_<cc>."""
    return cc if cc in PROJECT_CCS else f"tcp_{cc}"


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
