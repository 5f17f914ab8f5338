"""Every module tree builds warning-free (W=1) against every installed kernel's headers: Debian 12's
6.1 and 6.12, the latter with the 6.10+ `cong_control(sk, ack, flag, rs)` signature."""

import re
import subprocess
from pathlib import Path

import pytest

from cctest.kernel import kmod
from cctest.kernel.projectccs import tree_modules

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
    kmod.stage_tree(kmod.MODULES_DIR / tree, work)  # with modules/common beside it
    result = subprocess.run(["make", "-C", str(kmod.headers_dir(release)), f"M={work}", "W=1", "modules"],
                            capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert not re.search(r"warning:", output, re.IGNORECASE), output[-3000:]
    assert {ko.stem for ko in work.glob("*.ko")} == EXPECTED[tree]


def test_a_tree_is_built_and_identified_with_the_shared_headers(tmp_path):
    """modules/common is part of every tree's build: copied beside it, hashed with it, and followed
    by the source readers as the compiler's -I$(src)/../common finds it."""
    from cctest.kernel import projectccs

    tree, common = tmp_path / "modules" / "toy", tmp_path / "modules" / "common"
    tree.mkdir(parents=True)
    common.mkdir()
    (tree / "Kbuild").write_text("obj-m += toy.o\nccflags-y += -I$(src)/../common\n")
    (tree / "toy.c").write_text('#include "shared.h"\n')
    (common / "shared.h").write_text("#define SHARED 1\n")
    assert projectccs.local_include(tree / "toy.c", "shared.h") == common / "shared.h"
    before = kmod._tree_digest(tree)
    (common / "shared.h").write_text("#define SHARED 2\n")
    assert kmod._tree_digest(tree) != before
    kmod.stage_tree(tree, tmp_path / "build" / "toy")
    assert (tmp_path / "build" / "common" / "shared.h").read_text() == "#define SHARED 2\n"
    assert (tmp_path / "build" / "toy" / "toy.c").exists()
