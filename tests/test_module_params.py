"""Module parameters are validated at load: the bbr3 family (bbr3, bbr3plus, bbr2) states each parameter's range once (their
parameter ops refuse anything else with -EINVAL; modinfo shows the range), and cctest rejects a
scenario's out-of-range value before anything runs: one line, exit 2. The kernel side (insmod and
sysfs writes refused) is tests/test_vm_bbr3.py::test_kernel_refuses_out_of_range_parameters."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest import kmod
from cctest.cli import main
from cctest.plan import expand
from cctest.projectccs import tree_modules
from cctest.scenario import parse_experiments
from cctest.session import check_module_params

# the VM's kernel: what the VM tests load (headers for it are installed on CI and here)
RELEASE = "6.1.0-56-amd64"
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
