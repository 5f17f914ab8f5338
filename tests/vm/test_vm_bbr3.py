"""BBRv3, BBRv3+ and the BBRv2 approximation (modules/bbr3), for real in a UML or QEMU guest."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cctest.emulation.uml import dmesg_problems
from tests.vm.test_vm_engine import bottleneck_utilisation
from tests.vm.test_vm_modules import find, flows, runs_of, wide_state

pytestmark = pytest.mark.vm

STARTUP, DRAIN, PROBE_BW, PROBE_RTT = 0, 1, 2, 3
DOWN, CRUISE, REFILL, UP = 0, 1, 2, 3


@pytest.mark.vm_jobs("bbr3-single")
def test_single_flow_visits_every_state_and_fills_the_link(vm_results):
    (path,) = runs_of(vm_results, "bbr3-single")
    wide = wide_state(path)
    assert {STARTUP, DRAIN, PROBE_BW, PROBE_RTT} <= set(wide["mode"].dropna().astype(int))
    phases = set(wide[wide["mode"] == PROBE_BW]["phase"].dropna().astype(int))
    assert {DOWN, CRUISE, REFILL, UP} <= phases
    # after Startup, at the 2 BDP bottleneck (measured 0.966; ProbeRTT and DOWN cost the rest)
    assert bottleneck_utilisation(path, 2, 30) >= 0.90


@pytest.mark.vm_jobs("delay-deep")
def test_queueing_delay_well_below_cubic_in_a_deep_buffer(vm_results):
    delays = {}
    for cc in ("cubic", "bbr3"):
        path = find(vm_results, "delay-deep", **{"flows.0.cc": cc})
        ss = pd.read_parquet(path / "ss.parquet")
        steady = ss[ss["t_s"] > 5]
        delays[cc] = (steady["srtt_ms"] - steady["min_rtt_ms"]).mean()
    # CUBIC fills the 5 BDP (~100 ms) buffer; BBRv3 keeps about one probe's worth in it
    assert delays["cubic"] > 40, delays
    assert delays["bbr3"] < 0.5 * delays["cubic"], delays


def retransmission_rate(paths: list, flow: int) -> float:
    """Retransmitted segments per segment sent by one flow, over all the given runs."""
    retransmits = segments = 0
    for path in paths:
        row = flows(path).loc[flow]
        mss = pd.read_parquet(path / "ss.parquet")["mss"].dropna().iloc[-1]
        retransmits += row["retransmits"]
        segments += row["bytes_sent"] / mss
    return retransmits / max(segments, 1)


@pytest.mark.vm_jobs("variants-vs-cubic", "shallow-retransmissions")
def test_fewer_retransmissions_than_bbr_v1_in_a_shallow_buffer(vm_results):
    # The same scenario for both: against one CUBIC flow in a 0.5 BDP buffer (the paper's setting),
    # two runs of each. Single runs measured over three VM sessions: bbr3 2.05-2.25 %, kernel bbr
    # 2.55-5.18 % (BBRv1's rate swings with how the link splits; BBRv3's is held near its 2 % loss
    # threshold). A single flow does not discriminate: alone, BBRv1's probing fits in half a BDP
    # (0.1 %), while BBRv3 probes until it sees loss (0.6 %), as the draft intends.
    rates = {}
    for cc in ("bbr", "bbr3"):
        point = {"flows.1.cc": cc}
        runs = [find(vm_results, "variants-vs-cubic", buffer_bdp=0.5, **point),
                find(vm_results, "shallow-retransmissions", **point)]
        rates[cc] = retransmission_rate(runs, 1)
    assert rates["bbr"] > 0.02, rates  # the buffer does overflow under BBRv1
    assert rates["bbr3"] < rates["bbr"], rates


@pytest.mark.vm_jobs("variants-vs-cubic")
def test_bbr3plus_leaves_startup_with_a_lower_pacing_gain(vm_results):
    gains = {}
    for cc in ("bbr3", "bbr3plus"):
        path = find(vm_results, "variants-vs-cubic", buffer_bdp=5, **{"flows.1.cc": cc})
        wide = wide_state(path, flow=1)
        gains[cc] = wide[wide["mode"] == STARTUP]["pacing_gain"].max()
    assert gains["bbr3"] == pytest.approx(2.77, abs=0.01)
    assert gains["bbr3plus"] == pytest.approx(2.08, abs=0.01)


@pytest.mark.vm_jobs("bbr3-single", "delay-deep", "variants-vs-cubic", "shallow-retransmissions")
def test_kernel_log_is_clean_after_bbr3(vm_results):
    assert dmesg_problems(vm_results["_dmesg"]) == []


@pytest.mark.vm_jobs("bbr3-single", "delay-deep", "bbr2-single")
@pytest.mark.parametrize("job", ["bbr3-single", "delay-deep", "bbr2-single"])
def test_paces_on_payload_bytes_like_the_draft(vm_results, job):
    # Deviation 7: pacing_rate = gain * bw * (1 - 1 %), bw counted in mss_cache payload bytes (the
    # draft, Linux bbr, BBRv3). get_info's bw is max_bw in the same unit, so where gain is 1 and no
    # short-term bound is set, pacing_rate / bw = 0.99. Pacing on the MTU measured 1.0256 (1500/1448).
    path = find(vm_results, job, **({"flows.0.cc": "bbr3"} if job == "delay-deep" else {}))
    ss = pd.read_parquet(path / "ss.parquet")
    cruise = ss[(ss["flow"] == 0) & (ss["bbr_pacing_gain"] == 1) & (ss["bbr_bw_bps"] > 0)]
    assert len(cruise) > 20
    assert (cruise["pacing_rate_bps"] / cruise["bbr_bw_bps"]).median() == pytest.approx(0.99, abs=0.003)


@pytest.mark.vm_jobs("bbr3-fallback")
def test_a_run_with_fallback_sockets_is_marked(vm_results):
    (path,) = runs_of(vm_results, "bbr3-fallback")
    meta = json.loads((path / "meta.json").read_text())
    module = next(m for m in meta["modules"] if m["name"] == "bbr3")
    assert module["fallbacks"] >= 1  # the sender's socket (and iperf3's server side adopts bbr3 too)
    assert meta["fallback_sockets"] == module["fallbacks"]
    assert any("allocation-failure fallback" in w for w in meta["warnings"]), meta["warnings"]
    # the fallback carries the flow (Reno-like; modules/README.md), and get_info reports no model
    assert flows(path).loc[0, "bytes_received"] > 1_000_000
    ss = pd.read_parquet(path / "ss.parquet")
    assert (ss["bbr_bw_bps"].dropna() == 0).all()


@pytest.mark.vm_jobs("kparams:bbr3", "kparams:bbr3plus", "kparams:bbr2")
@pytest.mark.parametrize("cc", ["bbr3", "bbr3plus", "bbr2"])
def test_kernel_refuses_out_of_range_parameters(vm_results, cc):
    result = vm_results[f"kparams:{cc}"]
    # insmod with any of the harmful values fails (the module's parameter ops return -EINVAL) ...
    assert all(code != 0 for code in result["insmod_codes"].values()), result["insmod_codes"]
    # ... and so does writing them through sysfs, which leaves the value as it was
    assert set(result["sysfs"].values()) == {"Invalid argument"}, result["sysfs"]
    assert result["after_bad_writes"] == result["defaults"]
    # every default lies in the range modinfo states (the one definition cctest checks against)
    for name, (lo, hi, zero_ok, read_only) in result["ranges"].items():
        value = int(result["defaults"][name])
        assert read_only or lo <= value <= hi or (zero_ok and value == 0), (name, value)
    # cctest's loader turns the kernel's -EINVAL into its one-line bad-input error (exit 2)
    error = result["loader_error"]
    assert error and error["type"] == "BadParameter", error
    assert "\n" not in error["message"] and error["message"].startswith("exp.yaml: scenario s: key flows.0.params")
    assert "bw_probe_wait_rand_ms; allowed: 0..3600000" in error["message"], error


@pytest.mark.vm_jobs("diagchurn:bbr3")
def test_ss_reads_state_while_sockets_close(vm_results):
    # Bug 2: get_info (inet_diag, under RCU, no socket lock) against release on a closing socket.
    # A stock kernel has no KASAN, so a read after free would not show here by itself; what does
    # show is that the RCU-published pointer and kfree_rcu neither oops, warn nor leak the module.
    result = vm_results["diagchurn:bbr3"]
    assert result["connections"] > 100 and result["ss_runs"] > 20, result
    assert result["bbr_blocks"] > 0, result  # ss did read bbr3 state from live sockets
    assert result["unloaded"], result
    assert dmesg_problems(vm_results["_dmesg"]) == []


@pytest.mark.vm_jobs("bbr3-single")
def test_run_metadata_says_whose_constants_bbr3_uses(vm_results):
    # Deviation 10: comparisons are against the IETF draft's BBRv3, not Google's; the run says so
    (path,) = runs_of(vm_results, "bbr3-single")
    module = next(m for m in json.loads((path / "meta.json").read_text())["modules"] if m["name"] == "bbr3")
    assert "IETF draft's constants" in module["description"] and "not Google's" in module["description"]


# --- bbr2: the BBRv2 approximation (modules/bbr3/README.md, "bbr2") ---

# Google's BBRv2 alpha (tcp_bbr2.c) gains, as bbr2's defaults set them (x1000, traced / 1000)
V2_GAINS = {"startup_pacing": 2.885, "startup_cwnd": 2.885, "drain_pacing": 0.347, "down_pacing": 0.75,
            "up_pacing": 1.25, "up_cwnd": 2.0}


@pytest.mark.vm_jobs("bbr2-single")
def test_bbr2_alone_leaves_startup_with_v2_gains_and_fills_the_link(vm_results):
    (path,) = runs_of(vm_results, "bbr2-single")
    wide = wide_state(path)
    modes = wide["mode"].dropna().astype(int)
    assert {STARTUP, DRAIN, PROBE_BW} <= set(modes), set(modes)
    startup_end = wide.index[modes.ne(STARTUP).to_numpy().argmax()]
    assert startup_end < 3, startup_end  # a 20 Mbit/s, 20 ms path fills in well under a second or two
    probe_bw = wide[wide["mode"] == PROBE_BW]
    assert {DOWN, CRUISE, REFILL, UP} <= set(probe_bw["phase"].dropna().astype(int))
    # the gains it ran with are v2alpha's, not the draft's (2.77 / 2.0 / 0.5 / 0.9 / 2.25)
    seen = {
        "startup_pacing": wide[wide["mode"] == STARTUP]["pacing_gain"].max(),
        "startup_cwnd": wide[wide["mode"] == STARTUP]["cwnd_gain"].max(),
        "drain_pacing": wide[wide["mode"] == DRAIN]["pacing_gain"].min(),
        "down_pacing": probe_bw[probe_bw["phase"] == DOWN]["pacing_gain"].min(),
        "up_pacing": probe_bw[probe_bw["phase"] == UP]["pacing_gain"].max(),
        "up_cwnd": probe_bw[probe_bw["phase"] == UP]["cwnd_gain"].max(),
    }
    assert seen == pytest.approx(V2_GAINS, abs=0.002), seen
    # alone in 2 BDP it keeps the link busy after Startup, as bbr3 does (ProbeRTT and DOWN cost the rest)
    assert bottleneck_utilisation(path, 2, 20) >= 0.90
    ss = pd.read_parquet(path / "ss.parquet")
    assert (ss["bbr_bw_bps"].dropna() > 0).any(), "ss -ti shows no bbr:(...) block for bbr2"


@pytest.mark.vm_jobs("bbr2-single")
def test_run_metadata_says_bbr2_is_an_approximation(vm_results):
    (path,) = runs_of(vm_results, "bbr2-single")
    module = next(m for m in json.loads((path / "meta.json").read_text())["modules"] if m["name"] == "bbr2")
    assert module["description"].startswith("BBRv2 approximation") and "not Google's BBRv2" in module["description"]


@pytest.mark.vm_jobs("bbr2-vs-cubic")
def test_bbr2_and_cubic_share_a_busy_link(vm_results):
    (path,) = runs_of(vm_results, "bbr2-vs-cubic")
    received = flows(path)["bytes_received"]
    share = received.loc[1] / received.sum()
    # BBRv2 bounds itself by the loss it sees (inflight_hi, bw_lo/inflight_lo): neither flow starves
    # the other, and between them the 1 BDP buffer keeps the link busy
    assert 0.15 < share < 0.85, share
    assert bottleneck_utilisation(path, 2, 20) >= 0.90


@pytest.mark.vm_jobs("bbr2-single", "bbr2-vs-cubic", "kparams:bbr2")
def test_kernel_log_is_clean_after_bbr2(vm_results):
    assert dmesg_problems(vm_results["_dmesg"]) == []
