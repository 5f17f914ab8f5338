"""`bbr_model.bbr_model_figures` on a recorded run: one kernel-bbr flow alone at 50 Mbit/s, 20 ms,
5 BDP (bench/core_equivalence.py, VM, virtual clock), which kept a queue for ~30 % of its samples
after its bandwidth estimate overshot the link."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cctest.analysis.bbr_model import bbr_model_figures
from cctest.model.record import RunRecord
from tests import REPO

RUN = REPO / "tests" / "fixtures" / "runs" / "core-vs-kernel-50-20261123-073134-f0.cc-bbr-r0"


@pytest.fixture()
def recorded():
    link = RunRecord.model_validate(json.loads((RUN / "meta.json").read_text())).link
    return link, pd.read_parquet(RUN / "ss.parquet")


def test_figures_of_a_recorded_lone_bbr_flow(recorded):
    link, ss = recorded
    figures = bbr_model_figures(link, ss)
    assert figures["samples"] == len(ss[ss["t_s"] > 2.0])
    # kernel bbr paces 1 % below gain x estimate
    assert figures["pacing_margin"] == pytest.approx(0.99, abs=1e-6)
    # cwnd: 2 BDP plus the ACK-aggregation allowance and quanta
    assert 2.2 < figures["cwnd_over_bdp"] < 2.7
    # the estimate's median is within 1 % of the payload rate, RTprop the 20 ms path
    assert figures["bw_over_capacity"] == pytest.approx(1.0, abs=0.01)
    assert figures["min_rtt_ms"] == pytest.approx(20.0, rel=0.005)
    # ProbeBW's up and down phases each last about one round in eight
    assert figures["gain_1.25"] == pytest.approx(1 / 8, abs=0.03)
    assert figures["gain_0.75"] == pytest.approx(1 / 8, abs=0.03)
    # the run's episodes: a drained floor near the base RTT, a ceiling near cwnd's 2.45 x 20 ms
    assert figures["srtt_p05_ms"] < 24 < 40 < figures["srtt_p90_ms"] < 50
    assert 0.2 < figures["queued"] < 0.4 and 0.05 < figures["overestimated"] < 0.2


def test_figures_follow_the_samples(recorded):
    link, ss = recorded
    base = bbr_model_figures(link, ss)
    # an estimate 10 % higher everywhere is an overestimate everywhere; the margin is unchanged
    # because the pacing rate is compared with the estimate it came from
    inflated = ss.assign(bbr_bw_bps=ss["bbr_bw_bps"] * 1.1, pacing_rate_bps=ss["pacing_rate_bps"] * 1.1)
    figures = bbr_model_figures(link, inflated)
    assert figures["overestimated"] == 1.0
    assert figures["bw_over_capacity"] == pytest.approx(base["bw_over_capacity"] * 1.1)
    assert figures["pacing_margin"] == pytest.approx(base["pacing_margin"])
    # without the margin, pacing = gain x estimate
    unmargined = ss.assign(pacing_rate_bps=ss["bbr_bw_bps"] * ss["bbr_pacing_gain"])
    assert bbr_model_figures(link, unmargined)["pacing_margin"] == pytest.approx(1.0)
    # a link twice as fast: the same estimate is half its payload rate, the same cwnd half its BDP
    faster = link.model_copy(update={"rate_mbps": 2 * link.rate_mbps})
    assert bbr_model_figures(faster, ss)["bw_over_capacity"] == pytest.approx(base["bw_over_capacity"] / 2)
    assert bbr_model_figures(faster, ss)["cwnd_over_bdp"] == pytest.approx(base["cwnd_over_bdp"] / 2)
    # samples before settle_s are left out
    assert bbr_model_figures(link, ss, settle_s=10.0)["samples"] < base["samples"]
