"""The project's cc list comes from modules/*/Kbuild, and nowhere else."""

from pathlib import Path

from cctest.kernel import kmod
from cctest.kernel.projectccs import MODULES_DIR, kbuild_modules, project_ccs, traced_enums, tree_modules
from cctest.model import scenario


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


def test_traced_enums_are_the_marked_enums_of_the_module_and_its_includes(tmp_path):
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "Kbuild").write_text("obj-m += x.o y.o\n")
    (tree / "core.h").write_text('enum m {\t/* tracepoint field "mode" */\n\tM_A_ONE = 0,\n\tM_A_TWO = 2, /* skip */\n'
                                 '\tM_B,\n};\nenum unmarked { U_A = 0 };\n')
    (tree / "x.c").write_text('#include "core.h"\nenum p { /* tracepoint field "phase" (note) */ P_ON = 1, P_OFF };\n')
    (tree / "y.c").write_text('#include "missing.h"\n')
    assert traced_enums("x", tmp_path) == {"mode": {0: "A_ONE", 2: "A_TWO", 3: "B"}, "phase": {1: "ON", 2: "OFF"}}
    assert traced_enums("y", tmp_path) == {} and traced_enums("not_built", tmp_path) == {}


def test_the_report_labels_the_modes_and_phases_of_every_module():
    # the labels come from each module's sources: modules/bbr3's members share one tracepoint
    # layout (mode 0-3, phase 0-3), so each new member (bbr2, bbr3plus) gets them, not bare numbers
    from cctest.report.state_figure import state_enum

    family = tree_modules()["bbr3"]
    assert {"bbr3", "bbr3plus", "bbr2"} <= set(family)
    for cc in family:
        assert state_enum(cc, "mode") == {0: "STARTUP", 1: "DRAIN", 2: "PROBE_BW", 3: "PROBE_RTT"}, cc
        assert state_enum(cc, "phase") == {0: "DOWN", 1: "CRUISE", 2: "REFILL", 3: "UP"}, cc
    # the v1 family's modes are BBR's state machine too, and bbr_modest's phases are its own
    for cc in tree_modules()["bbr1"]:
        assert state_enum(cc, "mode") == {0: "STARTUP", 1: "DRAIN", 2: "PROBE_BW", 3: "PROBE_RTT"}, cc
    assert state_enum("bbr_modest", "phase") == {0: "NONE", 1: "SEARCH", 2: "LINEAR"}
    assert state_enum("cubic", "mode") is None


def test_the_vm_suite_covers_every_project_cc():
    """A new module under modules/ is run against CUBIC and has its bad parameters tried in the VM
    tests: their lists are checked against the modules' own (a module left out fails here, not
    silently in the VM)."""
    import yaml

    from tests.vm import guest

    scenarios = yaml.safe_load((Path(guest.__file__).parent / "scenarios.yaml").read_text())["scenarios"]
    assert scenarios["variants-vs-cubic"]["matrix"]["flows.1.cc"] == ["bbr", *project_ccs()]
    assert set(guest.BAD_PARAMS) == set(project_ccs())
