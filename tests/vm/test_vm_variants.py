"""The deviations from their papers found in the v1 variants (modules/bbr1/bbr_*.c), for real in a UML or QEMU guest:
each test reads the variant's own tracepoint (cc_state.parquet) from a run made for it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cctest.emulation.uml import dmesg_problems
from tests.vm.test_vm_modules import find, meta_of, runs_of, wide_state

pytestmark = pytest.mark.vm

PROBE_BW, PROBE_RTT = 2, 3


@pytest.mark.vm_jobs("histmin-alone")
def test_histmin_probe_minima_just_above_rtprop_agree_with_it(vm_results):
    # Deviation 9: alone on the path, a ProbeRTT's minimum is RTprop plus noise. "Higher by any
    # amount" counted that as a vote for a higher RTprop; inside the 10 % band it agrees with it.
    (path,) = runs_of(vm_results, "histmin-alone")
    wide = wide_state(path, flow=0)
    episodes = wide[wide["probe_min_us"] > 0]
    assert len(episodes) > 0, "no ProbeRTT episode traced"
    assert (wide["mode"] == PROBE_RTT).any()
    assert wide["streak"].max() == 0, episodes[["min_rtt_us", "probe_min_us", "streak"]]
    assert wide["raised"].max() == 0


@pytest.mark.vm_jobs("histmin-drastic")
def test_histmin_single_drastically_higher_probe_raises_rtprop(vm_results):
    (path,) = runs_of(vm_results, "histmin-drastic")
    wide = wide_state(path, flow=0)
    rtprop = wide["min_rtt_us"].dropna()
    assert wide["raised"].max() >= 1, "the single-probe trigger never fired"
    # one episode (no streak of K = 3) took RTprop to at least 3x the historical minimum
    assert rtprop.max() >= 3 * rtprop.min()
    assert wide.loc[wide["raised"] >= 1, "streak"].max() < 3


@pytest.mark.vm_jobs("cws-outage")
def test_cws_counts_an_rto_only_loss_and_judges_usf_after_it(vm_results):
    # Deviation 8: an RTO (TCP_CA_Loss) with no loss judgement pending starts one, like Recovery.
    # The link delivers nothing from 5 to 6 s, so the sender's RTO fires with no fast recovery first.
    (path,) = runs_of(vm_results, "cws-outage")
    wide = wide_state(path, flow=0).ffill()
    noted = wide.index[wide["rto_losses"].diff() > 0]
    assert len(noted) >= 1, "no RTO-only loss noted: the outage's RTO did not start a judgement"
    t = noted[0]
    # the module sees the state on its next ACK: the first after the outage, once a backed-off
    # retransmission got through (VM, 2026-11-23: last event before at 5.01 s, noted at 6.76 s)
    assert 6.0 < t < 7.5, f"first RTO-only loss noted at {t:.3f} s, not on the first ACK after the 5-6 s outage"
    assert not ((wide.index > 5.1) & (wide.index < t)).any(), "ACKs between the outage's start and the note"
    before = wide.loc[:t, "usf"].iloc[-1]
    # before the outage nothing was lost (5 BDP), so nothing else was pending; 3 smoothed RTTs on,
    # with no lower RTprop since, usf shrinks by beta (0.9) (measured: 1.00 -> 0.90 at 6.82 s),
    # and no fast recovery came between to claim the judgement
    later = wide[wide.index > t]
    changed = later[later["usf"] != before]
    assert len(changed), f"usf stayed {before} after the RTO-only loss at {t:.3f} s"
    judged_at = changed.index[0]
    assert judged_at < t + 1.0, f"judged {judged_at - t:.3f} s after the loss"
    assert changed["usf"].iloc[0] == pytest.approx(0.9 * before, abs=0.002), (before, changed["usf"].iloc[0])
    assert not (later.loc[:judged_at, "in_conservation"] > 0).any(), "a fast recovery came before the judgement"


@pytest.mark.vm_jobs("modest-shallow")
def test_modest_judges_each_search_step_on_packets_sent_under_it(vm_results):
    # Deviation 5: a step is taken only after a round of packets sent under the previous cap was
    # ACKed, i.e. two packet-timed rounds after it was set (it was one, judging pre-cap losses).
    (path,) = runs_of(vm_results, "modest-shallow")
    wide = wide_state(path, flow=1)
    search = wide[wide["phase"] == 1][["min_win", "max_win", "min_rtt_us"]].dropna()
    assert len(search) > 0, "no search phase"
    steps = search[(search[["min_win", "max_win"]].diff().abs().sum(axis=1) > 0)]
    gaps = pd.Series(steps.index).diff().dropna().to_numpy()
    rtprop_s = search["min_rtt_us"].median() / 1e6
    assert len(gaps) >= 3, steps
    # consecutive steps within one search: at least two rounds (>= 2 RTprop) apart
    assert (gaps[gaps < 1.0] >= 1.8 * rtprop_s).all(), (gaps[:20], rtprop_s)
    # and not every step shrinks the window: a clean cap raises min_win
    assert (steps["min_win"].diff() > 0).any(), steps


@pytest.mark.vm_jobs("modest-shallow")
def test_modest_keeps_its_window_within_wmin_of_bbrs_and_returns_within_a_round(vm_results):
    # ALGORITHMS.md as corrected 2026-11-24 (review section 1): the search is anchored on BBR's own
    # target and the cap never goes below Wmin (0.75) x that target, so the cwnd gain the module
    # reports (BBR's 2 x cap / target) stays >= 1.5 (less 2/target of rounding; 1.3 allows targets
    # down to 10 packets). Anchored on the capped window it ratcheted down to 2 x 12/75 = 0.32.
    (path,) = runs_of(vm_results, "modest-shallow")
    wide = wide_state(path, flow=1)
    probe_bw = wide[wide["mode"] == PROBE_BW]
    capping = probe_bw[probe_bw["phase"].isin([1, 2])]
    assert len(capping) > 0, "no search in ProbeBW"
    assert capping["cwnd_gain"].min() >= 1.3, capping["cwnd_gain"].describe()
    # Linear increase is per ACK (Alg. 1 l.21) up to last_cwnd: a linear phase is typically over
    # within about a round trip (per round it took one round per packet, ~10 rounds here); the
    # median, as an RTO during one (no ACKs for >= 200 ms) may stretch a single phase
    rtprop_s = wide["min_rtt_us"].dropna().median() / 1e6
    phase = wide["phase"].dropna()
    starts = phase.index[(phase == 2) & (phase.shift() != 2)]
    ends = phase.index[(phase != 2) & (phase.shift() == 2)]
    spans = [ends[ends > t][0] - t for t in starts if (ends > t).any()]
    assert len(spans) >= 1, phase.value_counts()
    assert float(np.median(spans)) < 3 * rtprop_s, (spans, rtprop_s)


@pytest.mark.vm_jobs("acw-gain-mode")
def test_acw_decides_its_gain_once_per_cycle_per_ack_or_per_round(vm_results):
    # per ACK the gain flips many times a round; per round it changes at most once; per gain cycle
    # at most once a cycle: 8 phases, each at least one RTprop but the 0.75 one, which may end early,
    # and at 1 BDP a round is at most two RTprops, so a cycle spans at least 3.5 rounds
    changes = {}
    for decide in (0, 1, 2):
        path = find(vm_results, "acw-gain-mode", **{"flows.0.params.decide": decide})
        table = pd.read_parquet(path / "cc_state.parquet")
        mine = table[table["flow"] == 0]
        wide = mine.pivot_table(index="t_s", columns="key", values="value")
        probe_bw = wide[wide["mode"] == PROBE_BW]
        rounds = len(probe_bw)  # one event per packet-timed round (plus changes: an upper bound)
        changes[decide] = (wide["gain_changes"].max(), rounds)
    per_cycle, per_ack, per_rnd = changes[0], changes[1], changes[2]
    assert per_rnd[0] <= per_rnd[1], changes
    assert per_ack[0] > per_ack[1], changes  # more than one flip per round on average
    assert per_cycle[0] <= per_cycle[1] / 3.5 + 1, changes
    # every per-round change is traced: the gain in the trace moves each time the counter does
    path = find(vm_results, "acw-gain-mode", **{"flows.0.params.decide": 2})
    wide = wide_state(path, flow=0)
    traced = (wide["cwnd_gain"].dropna().diff().abs() > 0).sum()
    assert traced >= 0.8 * wide["gain_changes"].max(), (traced, wide["gain_changes"].max())


@pytest.mark.vm_jobs("acw-hysteresis-edge")
def test_acw_holds_its_cases_at_the_edge_of_the_hysteresis_range(vm_results):
    # B1: leave_share_pct = 1 (its lowest) holds a case on one vote; the flows run, the module
    # changes its gain and traces it, and the kernel log stays clean (asserted below). 0 is
    # refused when set (kparams:bbr_acw in test_vm_modules.py).
    (path,) = runs_of(vm_results, "acw-hysteresis-edge")
    module = next(m for m in meta_of(path)["modules"] if m["name"] == "bbr_acw")
    assert module["effective_params"]["leave_share_pct"] == "1"
    assert module["effective_params"]["enter_share_pct"] == "50"
    for flow in (0, 1):
        wide = wide_state(path, flow=flow)
        assert (wide["mode"] == PROBE_BW).any(), f"flow {flow} never reached ProbeBW"
    assert max(wide_state(path, flow=f)["gain_changes"].max() for f in (0, 1)) > 0


@pytest.mark.vm_jobs("histmin-alone", "histmin-drastic", "cws-outage", "modest-shallow", "acw-gain-mode",
                     "acw-hysteresis-edge")
def test_kernel_log_is_clean_after_the_variants(vm_results):
    assert dmesg_problems(vm_results["_dmesg"]) == []
