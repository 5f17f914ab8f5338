"""The congestion controls this project builds, every module its Kbuild files declare, and the kernel's own.

modules/<tree>/Kbuild lists each module as an `obj-m` object (`obj-m += bbr_cws.o`); the module's
name is its cc's name. Reading them here keeps the list in one place: add a module to a Kbuild
file and scenarios accept it, `cctest modules` loads and unloads it. What a module's traced
enumerations (its mode, a variant's phase) mean is read from its sources too (`traced_enums`).

Where the sources are: modules/ beside the package in a checkout (an editable install), else the
copy an installed wheel ships as package data (cctest/_modules, pyproject.toml + setup.py). Where
they are built: build/modules/ in a checkout, else the user's cache directory
($XDG_CACHE_HOME/cctest/modules, by default ~/.cache/cctest/modules), so an installed cctest
builds its modules without writing into site-packages.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

CHECKOUT_DIR = Path(__file__).resolve().parents[2]
SHIPPED_MODULES_DIR = Path(__file__).resolve().parents[1] / "_modules"


def _has_trees(path: Path) -> bool:
    # Every entry looked at, not the first match in directory order: that order is the file
    # system's, and in a seeded UML guest each failed lookup moves the clock (docs/uml.md).
    return path.is_dir() and len(list(path.glob("*/Kbuild"))) > 0


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


# Congestion controls the kernel ships (built in or as tcp_<name>.ko) and the ones this project
# builds from modules/. Anything else is rejected before a run starts.
KERNEL_CCS = ("cubic", "reno", "bbr", "htcp", "vegas", "westwood", "dctcp", "bic", "illinois")
PROJECT_CCS = project_ccs()  # from modules/*/Kbuild


# `#include "file"`: a file of the module's own tree or of modules/common, followed here (traced enums) and by
# modsource (parameters)
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# the headers every tree shares: each Kbuild adds -I$(src)/../common
COMMON = "common"
# An enum that names the tracepoint field it numbers: `enum x { /* tracepoint field "mode" */ A = 0, ... }`.
_TRACED_ENUM = re.compile(r'\benum\s+\w+\s*\{\s*/\*\s*tracepoint field "(\w+)"[^*]*\*/(.*?)\}', re.S)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def local_include(including: Path, name: str) -> Path:
    """Where `#include "name"` in file `including` resolves, as the compiler finds it: beside the
    including file, else in modules/common (the tree's Kbuild: -I$(src)/../common)."""
    beside = including.parent / name
    return beside if beside.is_file() else including.parent.parent / COMMON / name


def _unit_files(path: Path, seen: set[Path]) -> list[Path]:
    """A source file and the local files it #includes, recursively, each once."""
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    return [path] + [f for name in LOCAL_INCLUDE.findall(path.read_text(errors="replace"))
                     for f in _unit_files(local_include(path, name), seen)]


def _enum_labels(body: str) -> dict[int, str]:
    """value -> enumerator name without the prefix all of them share (BBR3_BW_UP -> UP)."""
    values, value = {}, -1
    for item in _COMMENT.sub(" ", body).split(","):
        name, _, given = (part.strip() for part in item.partition("="))
        if name:
            value = int(given, 0) if given else value + 1
            values[value] = name
    words = [name.split("_") for name in values.values()]
    shared = 0
    while all(len(w) > shared + 1 and w[shared] == words[0][shared] for w in words):
        shared += 1
    return {v: "_".join(name.split("_")[shared:]) for v, name in values.items()}


def source_of(cc: str, modules_dir: Path = MODULES_DIR) -> Path | None:
    """Module `cc`'s main source, modules/<tree>/<cc>.c; None for a cc this project does not build."""
    tree = next((t for t, names in tree_modules(modules_dir).items() if cc in names), None)
    source = modules_dir / tree / f"{cc}.c" if tree else None
    return source if source and source.is_file() else None


@functools.cache
def traced_enums(cc: str, modules_dir: Path = MODULES_DIR) -> dict[str, dict[int, str]]:
    """Tracepoint field -> {value: label} of module `cc`, read from the enums its sources mark
    `/* tracepoint field "NAME" */`; empty for a cc this project does not build."""
    source = source_of(cc, modules_dir)
    if source is None:
        return {}
    return {field: _enum_labels(body) for path in _unit_files(source, set())
            for field, body in _TRACED_ENUM.findall(path.read_text(errors="replace"))}
