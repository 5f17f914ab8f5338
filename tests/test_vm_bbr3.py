"""BBRv3 and BBRv3+ (modules/bbr3), for real in a stock-kernel VM."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import dmesg_problems
from test_vm_engine import bottleneck_utilisation
from test_vm_modules import find, flows, runs_of, wide_state

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
