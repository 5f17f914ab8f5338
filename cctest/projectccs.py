"""The congestion controls this project builds: every module its Kbuild files declare.

modules/<tree>/Kbuild lists each module as an `obj-m` object (`obj-m += bbr_cws.o`); the module's
name is its cc's name. Reading them here keeps the list in one place: add a module to a Kbuild
file and scenarios accept it, `cctest modules` loads and unloads it.
"""

from __future__ import annotations

import re
from pathlib import Path

MODULES_DIR = Path(__file__).resolve().parent.parent / "modules"

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
