"""The userspace C harnesses of this folder, built for the tests that drive them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import REPO

HERE = Path(__file__).resolve().parent


def build_c_harness(tmp_path_factory: pytest.TempPathFactory, source: str, what: str) -> Path:
    """tests/c/<source>.c compiled against modules/bbr1's and bbr3's headers into a fresh tmp directory."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail(f"no C compiler (cc/gcc): needed to build the {what} harness")
    binary = tmp_path_factory.mktemp(source) / source
    includes = [f"-I{REPO / 'modules' / tree}" for tree in ("bbr1", "bbr3")]
    subprocess.run([cc, "-Wall", "-Werror", "-O1", *includes, "-o", str(binary), str(HERE / f"{source}.c")],
                   check=True)
    return binary
