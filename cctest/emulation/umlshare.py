"""What a UML guest sees of the host: the same fixed places on every machine.

A seeded guest repeats a run bit for bit only if nothing that differs between machines reaches it:
its kernel mixes every word of its command line into its generator, and under time travel each
clock read outside an interrupt and each failing system call moves its clock (docs/uml.md,
"Determinism"), so even the length of a path the guest walks can change a run. The guest
therefore never sees a host path. Every instance gets a directory of its own on the host, its
*home*, which is the UML process's working directory. The kernel starts `/proc/self/cwd/init.sh`:
the guest's root is the host's over hostfs, and the host resolves `/proc/self/cwd` for the UML
process, so that is the home's copy of init.sh. init.sh mounts, over hostfs and through the same
link:

  /run/share/home  the home: the command file, the plan file (the runs the host chose for this
                    guest), the manifest, the exit code, the stop request and the kernel log
  /run/share/src   the checkout, read-only (the home's symlink `src`)
  /run/share/venv  the Python environment, read-only (`venv`), when cctest runs from one
  /run/share/out   an empty directory the run writes into (`out`); the host moves what it holds
                    into --out when the guest has ended
"""

from __future__ import annotations

import shutil
import site
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .umlkernel import REPO_ROOT

GUEST_ROOT = PurePosixPath("/run/share")
GUEST_HOME = GUEST_ROOT / "home"
GUEST_SRC = GUEST_ROOT / "src"
GUEST_VENV = GUEST_ROOT / "venv"
GUEST_OUT = GUEST_ROOT / "out"
INIT = REPO_ROOT / "scripts" / "uml" / "init.sh"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def in_venv() -> bool:
    return sys.prefix != sys.base_prefix


def guest_python() -> str:
    """This interpreter as the guest names it: the venv's at its fixed place, else the system's own
    path (the same on every machine of a distribution)."""
    if in_venv():
        return str(GUEST_VENV / "bin" / Path(sys.executable).name)
    return sys.executable


def guest_path() -> str:
    """The guest's PATH: the venv's programs first, then the system's."""
    return f"{GUEST_VENV / 'bin'}:{SYSTEM_PATH}" if in_venv() else SYSTEM_PATH


# The guest's cctest runs `python -S`: its interpreter reads nothing that differs between two machines
# whose code and packages agree (a failing lookup moves a seeded guest's clock, module docstring), so
# that a run in a container repeats the same run on a host. `site` would run every .pth file of
# every site directory (a machine's own, e.g. one importing certifi at each start); the directories
# come in on PYTHONPATH instead (guest_site_dirs). And the settings below:
#   PYDANTIC_DISABLE_PLUGINS  pydantic looks for plugins in the entry points of every installed
#                             distribution, opening each one's entry_points.txt (most do not exist)
#   PYTHONCOERCECLOCALE, PYTHONUTF8
#                             the C locale in UTF-8 mode: no C.UTF-8 for Python to coerce to and hand
#                             its children, whose every setlocale would look for locale.alias and
#                             locale archives (the `locales` package)
#   PYTHONTZPATH              zoneinfo's search path as the host's Python has it, so that importing
#                             zoneinfo does not resolve sysconfig's config directory (libpython3.11)
GUEST_PYTHON_FLAGS = ("-S",)


def guest_python_env() -> dict[str, str]:
    env = {"PYDANTIC_DISABLE_PLUGINS": "__all__", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "1"}
    tzpath = sysconfig.get_config_var("TZPATH")
    if tzpath:
        env["PYTHONTZPATH"] = tzpath
    return env


def guest_site_dirs() -> list[str]:
    """The site directories `site` would put on this interpreter's path (those that exist: the
    venv's, then the system's where the venv includes them), as the guest names them."""
    dirs = []
    for found in site.getsitepackages():
        path = Path(found)
        if not path.is_dir():
            continue
        if in_venv() and path.is_relative_to(sys.prefix):
            dirs.append(str(GUEST_VENV / path.relative_to(sys.prefix)))
        else:
            dirs.append(str(path))
    return dirs


@dataclass(frozen=True)
class Home:
    """One instance's directory on the host, and where the guest finds its files."""

    path: Path
    out: Path  # --out, where the run directories go when the guest has ended

    @property
    def command(self) -> Path:
        return self.path / "command.sh"

    @property
    def plan(self) -> Path:
        return self.path / "plan.json"

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.txt"

    @property
    def exit_file(self) -> Path:
        return self.path / "exit"

    @property
    def stop_file(self) -> Path:
        return self.path / "stop"

    @property
    def dmesg(self) -> Path:
        return self.path / "dmesg.txt"

    @property
    def console(self) -> Path:
        return self.path / "console.raw"

    @property
    def written(self) -> Path:
        return self.path / "out"

    def guest(self, path: Path) -> str:
        """A file of the home as the guest names it."""
        return str(GUEST_HOME / path.relative_to(self.path))

    def to_host(self, guest_path: str) -> Path:
        """Where a path the guest wrote under /run/share/out is once collect() has run."""
        return self.out / PurePosixPath(guest_path).relative_to(GUEST_OUT)

    def collect(self) -> None:
        """Move what the guest wrote into --out, merging into directories that exist there."""
        _merge(self.written, self.out)


def prepare(out: Path, index: int) -> Home:
    """A fresh home for instance `index` under `out` (another session's left-over is replaced)."""
    home = Home(out / f".uml-{index}", out)
    if home.path.exists():
        shutil.rmtree(home.path)
    home.written.mkdir(parents=True)
    shutil.copy(INIT, home.path / "init.sh")  # with its mode: the kernel executes it
    (home.path / "src").symlink_to(REPO_ROOT)
    if in_venv():
        (home.path / "venv").symlink_to(Path(sys.prefix))
    return home


def _merge(source: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        target = into / entry.name
        if entry.is_dir() and not entry.is_symlink() and target.is_dir():
            _merge(entry, target)
            entry.rmdir()
        else:
            entry.replace(target)
