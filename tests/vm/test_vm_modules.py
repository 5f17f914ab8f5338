"""This project's kernel modules, for real in a UML or QEMU guest: build, load, carry flows, unload,
behave as their papers say, and leave the kernel log clean."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cctest.analysis.bbr_model import bbr_model_figures
from cctest.emulation.uml import dmesg_problems
from cctest.kernel.projectccs import project_ccs, tree_modules
from cctest.model.record import Link

pytestmark = pytest.mark.vm

V1_VARIANTS = tuple(tree_modules()["bbr1"])  # the modules' Kbuild files name them (cctest/kernel/projectccs.py)
ALL_MODULES = project_ccs()


def runs_of(results: dict, job: str) -> list[Path]:
    entry = results[job]
    assert entry["exit_code"] == 0, f"{job}: cctest exited with {entry['exit_code']}"
    return [Path(p) for p in entry["run_dirs"]]


def meta_of(path: Path) -> dict:
    return json.loads((path / "meta.json").read_text())


def find(results: dict, job: str, **matrix) -> Path:
    for path in runs_of(results, job):
        point = meta_of(path)["matrix"]
        if all(point.get(k) == v for k, v in matrix.items()):
            return path
    raise AssertionError(f"{job}: no run with {matrix}")


def state(path: Path, key: str, flow: int | None = None) -> pd.Series:
    table = pd.read_parquet(path / "cc_state.parquet")
    rows = table[table["key"] == key]
    if flow is not None:
        rows = rows[rows["flow"] == flow]
    return rows.sort_values("t_s")["value"]


def wide_state(path: Path, flow: int | None = None) -> pd.DataFrame:
    """The module state trace as one column per key, one row per event time (pivot sorts it)."""
    table = pd.read_parquet(path / "cc_state.parquet")
    if flow is not None:
        table = table[table["flow"] == flow]
    return table.pivot_table(index="t_s", columns="key", values="value")


def flows(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path / "flows.parquet").set_index("flow")


@pytest.mark.vm_jobs("variants-vs-cubic")
@pytest.mark.parametrize("buffer_bdp", [0.5, 5])
@pytest.mark.parametrize("cc", ALL_MODULES)
def test_module_loads_carries_a_flow_and_is_recorded(vm_results, cc, buffer_bdp):
    path = find(vm_results, "variants-vs-cubic", buffer_bdp=buffer_bdp, **{"flows.1.cc": cc})
    meta = meta_of(path)
    assert meta["status"] == "ok"
    module = next(m for m in meta["modules"] if m["name"] == cc)
    assert module["loaded_by_cctest"] and len(module["sha256"]) == 64 and module["path"].endswith(f"{cc}.ko")
    assert flows(path).loc[1, "bytes_received"] > 1_000_000
    ss = pd.read_parquet(path / "ss.parquet")
    assert ss[ss["flow"] == 1]["bbr_bw_bps"].notna().any(), "ss -ti shows no bbr:(...) block"
    assert len(state(path, "cwnd", flow=1)) > 5, "no state trace from the module's tracepoint"


@pytest.mark.vm_jobs("variants-vs-cubic")
def test_modules_are_unloaded_after_each_run(vm_results):
    lsmod = vm_results["variants-vs-cubic"]["leftovers"]["lsmod"].split()
    assert not set(ALL_MODULES) & set(lsmod)


def find_all(results: dict, job: str, **matrix) -> list[Path]:
    """Every run of a job at one matrix point (its repetitions)."""
    paths = [p for p in runs_of(results, job) if all(meta_of(p)["matrix"].get(k) == v for k, v in matrix.items())]
    assert paths, f"{job}: no run with {matrix}"
    return paths


# One run of each at 20 Mbit/s, where single runs agree; three at 50 (scenarios.yaml).
CORE_VS_KERNEL = {20: ("core-vs-kernel-bbr", 1), 50: ("core-vs-kernel-bbr-50", 3)}


def core_and_kernel(vm_results, rate_mbps) -> tuple[list[Path], list[Path]]:
    job, runs = CORE_VS_KERNEL[rate_mbps]
    kernel = find_all(vm_results, job, **{"flows.0.cc": "bbr"})
    core = find_all(vm_results, job, **{"flows.0.cc": "bbr1"})
    assert len(kernel) == len(core) == runs, (len(kernel), len(core))
    assert all(meta_of(p)["link"]["rate_mbps"] == rate_mbps for p in kernel + core)
    return kernel, core


@pytest.mark.vm_jobs("core-vs-kernel-bbr", "core-vs-kernel-bbr-50")
@pytest.mark.parametrize("rate_mbps", [20, 50])
def test_core_alone_delivers_like_kernel_bbr(vm_results, rate_mbps):
    kernel, core = core_and_kernel(vm_results, rate_mbps)
    # One paced flow alone fills the link either way (CI 2026-11-23, one run each: 35.33 vs 35.37 MB
    # in 15 s at 20 Mbit/s, 88.17 vs 87.95 MB at 50).
    received = [[flows(p).loc[0, "bytes_received"] / 1e6 for p in paths] for paths in (kernel, core)]
    assert pd.Series(received[1]).mean() == pytest.approx(pd.Series(received[0]).mean(), rel=0.08), received


def model_means(paths: list[Path]) -> pd.Series:
    """`bbr_model.bbr_model_figures` of each run, averaged over the runs."""
    return pd.DataFrame([bbr_model_figures(Link.model_validate(meta_of(p)["link"]), pd.read_parquet(p / "ss.parquet"))
                         for p in paths]).mean()


@pytest.mark.vm_jobs("core-vs-kernel-bbr", "core-vs-kernel-bbr-50")
@pytest.mark.parametrize("rate_mbps", [20, 50])
def test_core_alone_models_the_link_like_kernel_bbr(vm_results, rate_mbps):
    # What decides a lone BBRv1 flow's queue, compared with kernel bbr's. Not its median srtt: that
    # is set by how often the bandwidth estimate overshoots the link (a rate sample the link cannot
    # give; Spearman 0.83 between the two over 20 runs per rate), and kernel bbr's own runs span
    # 24.8-41.2 ms. Over ten runs each (bench/core_equivalence.py, modules/README.md) no figure
    # differs (U test) and the means of the median srtt differ by -0.7 % (20 Mbit/s) and +5.3 % (50),
    # inside the ±15 % that ten runs can resolve; one to three runs here cannot decide it.
    runs = core_and_kernel(vm_results, rate_mbps)
    kernel, core = (model_means(paths) for paths in runs)
    rtt_ms = meta_of(runs[1][0])["link"]["rtt_ms"]
    told = f"kernel {kernel.round(3).to_dict()}, core {core.round(3).to_dict()}"
    # the same model of the link: bandwidth (within 1 %; runs spread 1.003-1.014 of the payload
    # rate), RTprop, and cwnd (2 BDP plus the aggregation allowance and quanta; runs 2.42-2.59 BDP)
    assert core["bw_over_capacity"] == pytest.approx(kernel["bw_over_capacity"], rel=0.01), told
    assert core["min_rtt_ms"] == pytest.approx(kernel["min_rtt_ms"], rel=0.01), told
    assert core["cwnd_over_bdp"] == pytest.approx(kernel["cwnd_over_bdp"], rel=0.04), told
    # paced 1 % below gain x estimate, both
    assert core["pacing_margin"] == pytest.approx(0.99, abs=0.002) and kernel["pacing_margin"] == pytest.approx(
        0.99, abs=0.002), told
    # ProbeBW's cycle of eight phases of about a round each, read from `ss` every 10 ms (every 100 ms
    # aliased with the ~165 ms cycle: one run's 0.75 share read 0.046 where 10 ms reads 0.083-0.092).
    # The 1.25 phase lasts at least a round, until inflight reaches 1.25 BDP (UML, 3 runs of each
    # sender: 0.143-0.156 of the samples after Startup); the 0.75 phase at most a round, less once
    # inflight is down to the BDP (0.083-0.120); the core within 0.02 of the kernel (at most 0.004).
    for figures in (kernel, core):
        assert 1 / 9 < figures["gain_1.25"] < 0.2 and 0.05 < figures["gain_0.75"] < 0.14, told
    for phase in ("gain_1.25", "gain_0.75"):
        assert core[phase] == pytest.approx(kernel[phase], abs=0.02), told
    # and both drain what they queue (ProbeRTT at the latest): the lowest srtt is the base RTT plus
    # a few packets. Not a low quantile: a run queued for 83 % of its samples had its p05 in the
    # queue (CI 2026-11-23, core 27.4 ms). Over 46 runs the minimum was 20.7-23.3 ms.
    for figures in (kernel, core):
        assert figures["srtt_min_ms"] < 1.2 * rtt_ms, told
    assert core["srtt_min_ms"] == pytest.approx(kernel["srtt_min_ms"], rel=0.15), told


@pytest.mark.vm_jobs(*(f"kparams:{cc}" for cc in V1_VARIANTS))
@pytest.mark.parametrize("cc", V1_VARIANTS)
def test_v1_kernel_refuses_out_of_range_parameters(vm_results, cc):
    result = vm_results[f"kparams:{cc}"]
    # insmod with a value outside a parameter's range fails (-EINVAL from the core's parameter ops) ...
    assert all(code != 0 for code in result["insmod_codes"].values()), result["insmod_codes"]
    # ... and so does a sysfs write, which leaves the value as it was
    assert set(result["sysfs"].values()) == {"Invalid argument"}, result["sysfs"]
    assert result["after_bad_writes"] == result["defaults"]
    # every parameter states its range, and its default lies in it
    for name, (lo, hi, _zero_ok, _read_only) in result["ranges"].items():
        assert lo is not None, f"{cc} {name}: no [range] in its description"
        assert lo <= int(result["defaults"][name]) <= hi, (name, result["defaults"][name])
    # cctest's loader turns the kernel's -EINVAL into its one-line bad-input error (exit 2)
    error = result["loader_error"]
    assert error and error["type"] == "BadParameter", error
    assert "\n" not in error["message"] and "allowed: " in error["message"], error


@pytest.mark.vm_jobs("variants-vs-cubic")
def test_cws_scales_its_upper_bound_down_after_losses(vm_results):
    cws = find(vm_results, "variants-vs-cubic", buffer_bdp=0.5, **{"flows.1.cc": "bbr_cws"})
    assert flows(cws).loc[1, "retransmits"] > 0
    usf = state(cws, "usf", flow=1)
    assert usf.min() < 1.0 and usf.min() >= 0.2  # the paper's floor


@pytest.mark.vm_jobs("variants-vs-cubic")
def test_cws_retransmits_less_than_bbr_in_a_shallow_buffer(vm_results):
    cws = find(vm_results, "variants-vs-cubic", buffer_bdp=0.5, **{"flows.1.cc": "bbr_cws"})
    bbr = find(vm_results, "variants-vs-cubic", buffer_bdp=0.5, **{"flows.1.cc": "bbr"})
    assert flows(cws).loc[1, "retransmits"] < 0.8 * flows(bbr).loc[1, "retransmits"]


@pytest.mark.vm_jobs("variants-vs-cubic")
def test_shallow_uses_cwnd_gain_one_and_a_half_in_probe_bw(vm_results):
    path = find(vm_results, "variants-vs-cubic", buffer_bdp=5, **{"flows.1.cc": "bbr_shallow"})
    wide = wide_state(path, flow=1)
    probe_bw = wide[wide["mode"] == 2]
    assert len(probe_bw) > 0 and (probe_bw["cwnd_gain"] == 1.5).all()
    ss = pd.read_parquet(path / "ss.parquet")
    assert (ss[ss["flow"] == 1]["bbr_cwnd_gain"] == 1.5).any()


@pytest.mark.vm_jobs("variants-vs-cubic")
def test_modest_enters_search_after_losses(vm_results):
    path = find(vm_results, "variants-vs-cubic", buffer_bdp=0.5, **{"flows.1.cc": "bbr_modest"})
    assert flows(path).loc[1, "retransmits"] > 0
    assert (state(path, "phase", flow=1) == 1).any()


def rtprop_around_first_probe_rtt(path: Path) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Flow 0's state, and its RTprop before and after its first ProbeRTT episode."""
    wide = wide_state(path, flow=0)
    in_probe_rtt = wide["mode"] == 3
    assert in_probe_rtt.any(), "no ProbeRTT in the run"
    start = in_probe_rtt.idxmax()
    after = wide[(wide.index > start) & ~in_probe_rtt]
    assert len(after) > 0, "the run ended inside ProbeRTT"
    return wide, wide.loc[:start, "min_rtt_us"].iloc[:-1], after["min_rtt_us"]


@pytest.mark.vm_jobs("histmin-standing-queue")
def test_bbr1_adopts_a_queue_inflated_rtprop_when_probe_rtt_meets_cubics_queue(vm_results):
    # The problem bbr_histmin addresses (004 IV-E.2): the 10 s filter expires, ProbeRTT cannot
    # drain CUBIC's queue, and plain BBR takes the episode's minimum as RTprop
    path = find(vm_results, "histmin-standing-queue", **{"flows.0.cc": "bbr1"})
    _, before, after = rtprop_around_first_probe_rtt(path)
    assert after.iloc[0] > 1.3 * before.min()


@pytest.mark.vm_jobs("histmin-standing-queue")
def test_histmin_keeps_the_historical_rtprop_when_probe_rtt_meets_a_queue(vm_results):
    path = find(vm_results, "histmin-standing-queue", **{"flows.0.cc": "bbr_histmin"})
    wide, _, after = rtprop_around_first_probe_rtt(path)
    # the episode's minimum stayed above RTprop, so it counts towards the K=3 streak ...
    assert after.notna().all() and wide["streak"].max() >= 1
    # ... and RTprop never rose: one episode is not K of them
    rtprop = wide["min_rtt_us"].dropna()
    assert (rtprop.diff().dropna() <= 0).all()
    assert wide["raised"].max() == 0


@pytest.mark.vm_jobs("acw-rtt-mix")
def test_acw_moves_cwnd_gain_away_from_two_with_mixed_rtts(vm_results):
    (path,) = runs_of(vm_results, "acw-rtt-mix")
    gains = state(path, "cwnd_gain")
    assert (gains.round(3) != 2.0).any() and gains.notna().all()
    for key in ("alpha", "beta"):
        assert len(state(path, key)) > 0


@pytest.mark.vm_jobs("acw-rtt-mix")
def test_module_parameter_from_the_scenario_reaches_sysfs_and_meta(vm_results):
    (path,) = runs_of(vm_results, "acw-rtt-mix")
    module = next(m for m in meta_of(path)["modules"] if m["name"] == "bbr_acw")
    assert module["params"] == {"rate_rounds": 8}
    assert module["effective_params"]["rate_rounds"] == "8"  # read from /sys/module during the run


@pytest.mark.vm_jobs("variants-vs-cubic", "core-vs-kernel-bbr", "core-vs-kernel-bbr-50", "acw-rtt-mix",
                     "histmin-standing-queue")
def test_kernel_log_is_clean_after_every_module(vm_results):
    assert vm_results["_dmesg"], "no dmesg captured"
    assert dmesg_problems(vm_results["_dmesg"]) == []
