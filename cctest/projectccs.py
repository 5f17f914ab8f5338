"""The congestion controls this project builds: every module its Kbuild files declare.

modules/<tree>/Kbuild lists each module as an `obj-m` object (`obj-m += bbr_cws.o`); the module's
name is its cc's name. Reading them here keeps the list in one place: add a module to a Kbuild
file and scenarios accept it, `cctest modules` loads and unloads it.

Where the sources are: modules/ beside the package in a checkout (an editable install), else the
copy an installed wheel ships as package data (cctest/_modules, pyproject.toml + setup.py). Where
they are built: build/modules/ in a checkout, else the user's cache directory
($XDG_CACHE_HOME/cctest/modules, by default ~/.cache/cctest/modules), so an installed cctest
builds its modules without writing into site-packages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CHECKOUT_DIR = Path(__file__).resolve().parent.parent
SHIPPED_MODULES_DIR = Path(__file__).resolve().parent / "_modules"


def _has_trees(path: Path) -> bool:
    return path.is_dir() and any(path.glob("*/Kbuild"))


def in_checkout() -> bool:
    return _has_trees(CHECKOUT_DIR / "modules")


def modules_dir() -> Path:
    return CHECKOUT_DIR / "modules" if in_checkout() else SHIPPED_MODULES_DIR


def build_dir() -> Path:
    if in_checkout():
        return CHECKOUT_DIR / "build" / "modules"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "cctest" / "modules"


MODULES_DIR = modules_dir()

_OBJ_M = re.compile(r"^\s*obj-m\s*[+:]?=\s*(.*?)\s*$", re.M)


def kbuild_modules(text: str) -> list[str]:
    """The module names of a Kbuild file's `obj-m` lines, in file order."""
    uncommented = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    return [word[:-2] for line in _OBJ_M.findall(uncommented) for word in line.split() if word.endswith(".o")]


def tree_modules(modules_dir: Path = MODULES_DIR) -> dict[str, list[str]]:
    """module tree (a directory under modules/ with a Kbuild file) -> its modules."""
    return {kbuild.parent.name: kbuild_modules(kbuild.read_text())
            for kbuild in sorted(modules_dir.glob("*/Kbuild"))}


def project_ccs(modules_dir: Path = MODULES_DIR) -> tuple[str, ...]:
    """Every tree's modules, trees in name order (empty without the modules/ sources)."""
    return tuple(name for names in tree_modules(modules_dir).values() for name in names)
