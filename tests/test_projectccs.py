"""The project's cc list comes from modules/*/Kbuild, and nowhere else."""

import sys
from pathlib import Path

from cctest import kmod, scenario
from cctest.projectccs import MODULES_DIR, kbuild_modules, project_ccs, tree_modules


def test_kbuild_obj_m_lines_in_order_comments_ignored():
    text = ("# obj-m += commented.o\nobj-m += a.o b.o  # c.o\nobj-m := d.o\nobj-y += builtin.o\n"
            "ccflags-y += -I$(src)\n")
    assert kbuild_modules(text) == ["a", "b", "d"]


def test_project_ccs_are_the_kbuild_modules_each_with_its_source():
    trees = tree_modules()
    assert set(trees) == {p.parent.name for p in MODULES_DIR.glob("*/Kbuild")} and trees
    assert scenario.PROJECT_CCS == project_ccs() == tuple(n for names in trees.values() for n in names)
    for tree, names in trees.items():
        for name in names:
            assert (MODULES_DIR / tree / f"{name}.c").exists(), f"{tree}/Kbuild names {name}, no {name}.c"
    assert kmod.MODULES_DIR == MODULES_DIR
    assert not set(scenario.PROJECT_CCS) & set(scenario.KERNEL_CCS)


def test_no_modules_tree_means_no_project_ccs(tmp_path):
    assert project_ccs(tmp_path) == ()


def test_the_report_labels_the_modes_and_phases_of_every_bbr3_family_module():
    # modules/bbr3's modules share one tracepoint layout (mode 0-3, phase 0-3): each new member
    # (bbr2, bbr3plus) must get the state plot's labels too, not bare numbers
    from cctest.report.figures import state_enum

    family = tree_modules()["bbr3"]
    assert {"bbr3", "bbr3plus", "bbr2"} <= set(family)
    for cc in family:
        assert state_enum(cc, "mode") == {0: "STARTUP", 1: "DRAIN", 2: "PROBE_BW", 3: "PROBE_RTT"}, cc
        assert state_enum(cc, "phase") == {0: "DOWN", 1: "CRUISE", 2: "REFILL", 3: "UP"}, cc


def test_the_vm_suite_covers_every_project_cc():
    """A new module under modules/ is run against CUBIC and has its bad parameters tried in the VM
    tests: their lists are checked against the modules' own (a module left out fails here, not
    silently in the VM)."""
    import yaml

    sys.path.insert(0, str(Path(__file__).parent / "vm"))
    import guest

    scenarios = yaml.safe_load((Path(__file__).parent / "vm" / "scenarios.yaml").read_text())["scenarios"]
    assert scenarios["variants-vs-cubic"]["matrix"]["flows.1.cc"] == ["bbr", *project_ccs()]
    assert set(guest.BAD_PARAMS) == set(project_ccs())
