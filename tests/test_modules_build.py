"""Every module tree builds warning-free (W=1) against every installed kernel's headers: Debian 12's
6.1 and 6.12, the latter with the 6.10+ `cong_control(sk, ack, flag, rs)` signature."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cctest import kmod
from cctest.projectccs import tree_modules

RELEASES = sorted(p.parent.parent.name for p in Path("/lib/modules").glob("*/build/Makefile"))
EXPECTED = {tree: set(names) for tree, names in tree_modules().items()}  # what each Kbuild declares


def test_both_signatures_are_covered():
    """CI installs 6.1 (old cong_control) and 6.12 (new) headers; without both this file proves less."""
    versions = {tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", r).groups()) for r in RELEASES}
    assert any(v < (6, 10) for v in versions) and any(v >= (6, 10) for v in versions), RELEASES


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("tree", sorted(EXPECTED))
def test_module_tree_builds_without_warnings(tree, release, tmp_path):
    work = tmp_path / tree
    shutil.copytree(kmod.MODULES_DIR / tree, work)
    result = subprocess.run(["make", "-C", str(kmod.headers_dir(release)), f"M={work}", "W=1", "modules"],
                            capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert not re.search(r"warning:", output, re.IGNORECASE), output[-3000:]
    assert {ko.stem for ko in work.glob("*.ko")} == EXPECTED[tree]
