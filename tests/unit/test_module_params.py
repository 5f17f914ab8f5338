"""Module parameters are validated at load: the bbr3 family (bbr3, bbr3plus, bbr2) states each
parameter's range once (their parameter ops refuse anything else with -EINVAL; modinfo shows the
range), and cctest rejects a scenario's out-of-range value before anything runs: one line, exit 2.
The kernel side (insmod and sysfs writes refused) is
tests/vm/test_vm_bbr3.py::test_kernel_refuses_out_of_range_parameters."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.cli.main import main
from cctest.emulation import vm
from cctest.kernel import kmod
from cctest.kernel.modparams import ParamSpec
from cctest.kernel.projectccs import tree_modules
from cctest.model.plan import expand
from cctest.model.scenario import parse_experiments
from cctest.run.session import check_module_params

# the VM's kernel: what the VM tests load, Debian's linux-image-amd64 of the day (its headers come
# with it: scripts/setup.sh); the ABI number moves with Debian's point releases
RELEASE = (vm.distro_default_image() or "vmlinuz-unknown (linux-image-amd64 not installed)").removeprefix("vmlinuz-")
GAINS = ("startup_pacing_gain_x1000", "cwnd_gain_x1000", "drain_pacing_gain_x1000", "probe_down_pacing_gain_x1000",
         "probe_up_pacing_gain_x1000", "probe_up_cwnd_gain_x1000", "probe_rtt_cwnd_gain_x1000",
         "startup_cwnd_gain_x1000", "up_exit_pif_gain_x1000")
# 0 means "unset" there: derive from alpha, beta, gamma; the default cwnd gain; the draft's UP exit
ZERO_MEANS_UNSET = ("startup_pacing_gain_x1000", "startup_cwnd_gain_x1000", "up_exit_pif_gain_x1000")
BBR3_FAMILY = tree_modules()["bbr3"]  # bbr3, bbr3plus, bbr2: one source, one parameter set


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    if not (kmod.headers_dir(RELEASE) / "Makefile").exists():
        pytest.fail(f"kernel headers for {RELEASE} missing (apt-get install linux-headers-{RELEASE})")
    return kmod.build(RELEASE)


@pytest.mark.parametrize("cc", BBR3_FAMILY)
def test_every_parameter_has_a_range_or_is_read_only(built, cc):
    specs = kmod.param_specs(built[cc])
    assert len(specs) >= 27
    unranged = [name for name, spec in specs.items() if spec.lo is None and not spec.read_only]
    assert unranged == []
    assert specs["fallbacks"].read_only


@pytest.mark.parametrize("cc", BBR3_FAMILY)
def test_ranges_exclude_the_values_the_review_found_harmful(built, cc):
    specs = kmod.param_specs(built[cc])
    assert not specs["bw_probe_wait_rand_ms"].allows(2**32 - 1)  # % (x + 1) == % 0 in softirq
    assert not specs["probe_rtt_interval_ms"].allows(0)  # a permanent ProbeRTT
    assert not specs["startup_gamma"].allows(0) and not specs["startup_beta_x1000"].allows(1000)
    for gain in GAINS:
        spec = specs[gain]
        assert spec.hi << 8 < 2**32, gain  # get_info's x256 fields
        if gain not in ZERO_MEANS_UNSET:
            assert not spec.allows(0), gain  # pacing gain 0: pacing rate 0
        else:
            assert spec.zero_ok and spec.lo >= 100, gain
    for name, spec in specs.items():
        assert spec.read_only or spec.lo <= spec.hi, name


SCENARIO = """
defaults:
  link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
  duration_s: 5
scenarios:
  bad:
    flows: [{cc: cubic}, {cc: bbr3, params: {bw_probe_wait_rand_ms: 4294967295}}]
  good:
    flows: [{cc: bbr3, params: {bw_probe_wait_rand_ms: 500, probe_rtt_interval_ms: 2000}}]
  swept:
    flows: [{cc: bbr3, params: {probe_rtt_interval_ms: 5000}}]
    matrix: {flows.0.params.probe_rtt_interval_ms: [5000, 0]}
"""


def specs_of(name: str):
    return expand(parse_experiments(SCENARIO, "exp.yaml"), name)


def test_out_of_range_value_is_one_line_naming_file_scenario_key_parameter_and_range(built):
    with pytest.raises(kmod.BadParameter) as error:
        check_module_params(specs_of("bad"), RELEASE, Path("exp.yaml"))
    message = str(error.value)
    assert "\n" not in message
    assert message == ("exp.yaml: scenario bad: key flows.1.params: 4294967295 is not allowed for bbr3 parameter "
                       "bw_probe_wait_rand_ms; allowed: 0..3600000")


def test_a_swept_value_out_of_range_is_caught_before_the_first_run(built):
    with pytest.raises(kmod.BadParameter, match=r"swept \(flows.0.params.probe_rtt_interval_ms=0\).*allowed: 100\.\."):
        check_module_params(specs_of("swept"), RELEASE, Path("exp.yaml"))


def test_in_range_values_pass(built):
    check_module_params(specs_of("good"), RELEASE, Path("exp.yaml"))


def test_read_only_counter_cannot_be_set(built):
    with pytest.raises(kmod.BadParameter, match="fallbacks; allowed: read-only"):
        kmod.check_params("bbr3", {"fallbacks": 3}, RELEASE)


def test_cli_exits_2_with_one_line_before_loading_anything(built):
    result = CliRunner().invoke(main, ["modules", "load", "bbr3", "probe_rtt_interval_ms=0", "-r", RELEASE])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "probe_rtt_interval_ms" in lines[0] and "allowed: 100..3600000" in lines[0], lines


# --- the same ranges from the sources, before anything is built ----------------------------

def test_the_sources_declare_what_modinfo_shows_for_every_module(built):
    """cctest.kernel.modsource expands the modules' own macros: its table is modinfo's, parameter for
    parameter, without a build (so `list` and `--dry-run` can refuse what insmod would)."""
    from cctest.kernel import modsource

    for cc in kmod.PROJECT_CCS:
        assert modsource.declared(cc).specs == kmod.param_specs(built[cc]), cc


FLOWS = ("defaults:\n  link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}\n  duration_s: 5\n"
         "scenarios:\n  s:\n    flows: [%s]\n")
REFUSED = {
    "out of range": ("{cc: bbr3, params: {probe_rtt_interval_ms: 0}}", "probe_rtt_interval_ms; allowed: 100..3600000"),
    "unknown": ("{cc: bbr_modest, params: {wmid_x1000: 1}}",
                "module bbr_modest has no parameter 'wmid_x1000'; allowed: "),
    "read-only": ("{cc: bbr3plus, params: {fallbacks: 0}}", "fallbacks; allowed: read-only"),
    "Wmin above Wmax": ("{cc: bbr_modest, params: {wmin_x1000: 900, wmax_x1000: 800}}",
                        "wmax_x1000 = 800 is below wmin_x1000 = 900; bbr_modest keeps wmax_x1000 at least wmin_x1000"),
    "Wmin above the default Wmax": ("{cc: bbr_modest, params: {wmin_x1000: 1000, wmax_x1000: 999}}", "is below"),
    "inverted hysteresis": ("{cc: bbr_acw, params: {enter_share_pct: 60, leave_share_pct: 90}}",
                            "leave_share_pct = 90 is above enter_share_pct = 60"),
    "swept out of range": ("{cc: bbr1, params: {cwnd_gain_x1000: 2000}}",
                           "(flows.0.params.cwnd_gain_x1000=0): key flows.0.params: 0 is not allowed"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_list_and_dry_run_refuse_what_a_run_would(tmp_path, case):
    flows, expected = REFUSED[case]
    path = tmp_path / "exp.yaml"
    swept = "    matrix: {flows.0.params.cwnd_gain_x1000: [2000, 0]}\n" if "swept" in case else ""
    path.write_text(FLOWS % flows + swept)
    for args in (["list", "-f", str(path)], ["run", "s", "-f", str(path), "--dry-run"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{path}: scenario s" in lines[0] and expected in lines[0], lines


def test_values_the_module_takes_pass(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(FLOWS % "{cc: bbr_modest, params: {wmin_x1000: 500, wmax_x1000: 500}}, "
                             "{cc: bbr_acw, params: {enter_share_pct: 80}}, "
                             "{cc: bbr3, params: {startup_pacing_gain_x1000: 0}}")
    result = CliRunner().invoke(main, ["run", "s", "-f", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output


def test_the_parser_knows_no_module_only_the_preprocessor(tmp_path):
    """A made-up module with its own macro, a symbolic default, a read-only counter and a clamp
    through a variable: read as modinfo and the code would have it."""
    from cctest.kernel import modsource

    tree = tmp_path / "modules" / "toy"
    tree.mkdir(parents=True)
    (tree / "Kbuild").write_text("obj-m += toy.o\n")
    (tree / "common.h").write_text(
        '#define TOY_P(n, d, lo, hi, what) \\\n  static int n = d; \\\n'
        '  module_param_cb(n, &toy_ops, &toy_##n, 0644); \\\n  MODULE_PARM_DESC(n, what " [range " #lo ".." #hi "]")\n')
    (tree / "toy.c").write_text(
        '#include "common.h"\n#define TOY_DEFAULT_HI 40\n'
        'TOY_P(low, 10, 0, 100, "the lower one, in lo units");\n'
        'TOY_P(high, TOY_DEFAULT_HI, 5, 200, "the upper");  /* TOY_P(ghost, 1, 1, 1, "x") */\n'
        'module_param_cb(count, &toy_counter, NULL, 0444);\nMODULE_PARM_DESC(count, "events [read-only]");\n'
        'static u32 toy_param(int v, int lo, int hi) { return clamp(v, lo, hi); }\n'
        'static void f(void) {\n  u32 a = toy_param(low, 0, 100);\n  u32 b = toy_param(high, a, 200);\n}\n')
    found = modsource.declared.__wrapped__("toy", tmp_path / "modules")
    assert found.specs == {"low": ParamSpec("low", 0, 100), "high": ParamSpec("high", 5, 200),
                           "count": ParamSpec("count", read_only=True)}
    assert found.defaults == {"low": 10, "high": 40}
    assert [(r.param, r.op, r.other) for r in found.relations] == [("high", ">=", "low")]
    assert found.relations[0].where == "toy.c:10"
