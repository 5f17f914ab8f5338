"""The composable bottleneck for real in a UML or QEMU guest: AQMs keep CUBIC's queue short, mark
with ECN when the hosts negotiate it, the link's rate steps mid-run, and an outage delivers nothing
(tests/vm/scenarios.yaml aqm-vs-fifo, aqm-ecn, rate-step, cws-outage)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from cctest.analysis.derived import (
    acked_within,
    bottleneck_samples,
    counter_growth,
    dequeued_binned,
    link_bytes_between,
    link_rate_mbps_at,
)
from cctest.model.aqm import AQMS as REGISTERED
from cctest.model.bottleneck import ECN_SYSCTL
from cctest.model.record import Link
from tests.vm.test_vm_modules import find, meta_of, runs_of

pytestmark = pytest.mark.vm

AQMS = [kind for kind in REGISTERED if kind != "fifo"]  # scenarios.yaml's aqm-vs-fifo runs each (test_bottleneck)
STEADY_FROM_S = 3.0  # after slow start and its first recovery


def queueing_delay_ms(path) -> float:
    """Mean of the flow's smoothed RTT over its base RTT in the steady part: the queue it saw."""
    ss = pd.read_parquet(path / "ss.parquet")
    base = ss["min_rtt_ms"].min()
    steady = ss[ss["t_s"] >= STEADY_FROM_S]
    return float((steady["srtt_ms"] - base).mean())


def aqm_rows(path, kind: str) -> pd.DataFrame:
    qdisc = pd.read_parquet(path / "qdisc.parquet")
    return qdisc[(qdisc["role"] == "bottleneck") & (qdisc["kind"] == kind)].sort_values("t_s")


@pytest.mark.vm_jobs("aqm-vs-fifo")
@pytest.mark.parametrize("aqm", AQMS)
def test_each_aqm_keeps_cubics_queue_far_below_the_fifos(vm_results, aqm):
    fifo = find(vm_results, "aqm-vs-fifo", aqm="fifo")
    run = find(vm_results, "aqm-vs-fifo", aqm=aqm)
    assert meta_of(run)["status"] == "ok"
    fifo_ms, aqm_ms = queueing_delay_ms(fifo), queueing_delay_ms(run)
    # 5 BDP at 20 ms is 100 ms of buffer: CUBIC keeps a FIFO mostly full
    assert fifo_ms > 40, fifo_ms
    assert aqm_ms < 0.25 * fifo_ms, {"fifo_ms": fifo_ms, aqm: aqm_ms}
    # the AQM itself held the queue and acted on it (dropped: no ECN here), under a shaper at the link rate
    rows = aqm_rows(run, aqm)
    assert len(rows) > 50 and rows["backlog_pkts"].max() > 0, rows.tail()
    assert rows["drops"].max() > 0, rows.tail()
    tc = meta_of(run)["qdisc_plan"]["ccs1-btl"]["tc"]
    kinds = [toks[toks.index("handle") + 2] for toks in (line.split() for line in tc)]
    assert kinds == ["netem", "tbf", aqm], tc
    # and the link was not given away for the short queue
    got = pd.read_parquet(run / "flows.parquet")["bytes_received"].sum() * 8 / 12 / 1e6
    assert got > 0.85 * 10, got


@pytest.mark.vm_jobs("aqm-ecn")
@pytest.mark.parametrize("aqm", ["fq_codel", "red"])
def test_with_ecn_each_aqm_marks_and_the_sampler_counts_what_tc_reports(vm_results, aqm):
    run = find(vm_results, "aqm-ecn", aqm=aqm)
    meta = meta_of(run)
    assert meta["status"] == "ok"
    assert meta["sysctls"][ECN_SYSCTL]["new"] == "1" and meta["sysctls"][ECN_SYSCTL]["old"] == "2", meta["sysctls"]
    marks = aqm_rows(run, aqm)["ecn_marks"]
    assert marks.max() > 0, marks.describe()
    # what the sampler parsed from the kernel's statistics is what `tc -s qdisc` printed at the end
    field = "marked" if aqm == "red" else "ecn_mark"
    printed = int(re.search(rf"\b{field} (\d+)", meta["qdiscs"]["ccs1-btl"]).group(1))
    assert marks.max() == printed, (marks.max(), printed)
    assert queueing_delay_ms(run) < 25, queueing_delay_ms(run)


def dequeued_mbps(path, edges: np.ndarray) -> np.ndarray:
    """The bottleneck's dequeue rate in each interval between `edges` (s after time zero), from its
    cumulative sent bytes interpolated at the edges."""
    bq = bottleneck_samples(pd.read_parquet(path / "qdisc.parquet"))
    return dequeued_binned(bq, edges) * 8 / np.diff(edges) / 1e6


@pytest.mark.vm_jobs("rate-step")
@pytest.mark.parametrize("aqm", ["fifo", "fq_codel"])
def test_the_aggregate_follows_a_rate_step_within_a_few_rtts(vm_results, aqm):
    run = find(vm_results, "rate-step", aqm=aqm)
    meta = meta_of(run)
    assert meta["status"] == "ok"
    applied = meta["rate_schedule_applied"]
    assert len(applied) == 1 and 6.0 <= applied[0]["applied_s"] < 6.1, applied
    assert link_rate_mbps_at(Link.model_validate(meta["link"]), [5.9, 6.1]).tolist() == [20, 10]
    before = dequeued_mbps(run, np.array([2.0, 6.0]))[0]
    assert 0.85 * 20 <= before <= 1.03 * 20, before
    # 0.25 s bins from 0.1 s (a few RTTs) after the step: each at the new rate, none above it
    edges = np.arange(6.1, 12.0, 0.25)
    after = dequeued_mbps(run, edges)
    assert after.max() <= 1.08 * 10, after.round(2).tolist()
    assert after.mean() >= 0.85 * 10, after.round(2).tolist()


@pytest.mark.vm_jobs("cws-outage")
def test_an_outage_delivers_nothing_then_the_link_comes_back(vm_results):
    (run,) = runs_of(vm_results, "cws-outage")
    meta = meta_of(run)
    assert meta["status"] == "ok"
    (applied,) = meta["outages_applied"]
    assert applied["at_s"] == 5 and applied["duration_s"] == 1, applied
    assert 5.0 <= applied["started_s"] < 5.05 and 6.0 <= applied["ended_s"] < 6.05, applied
    link = Link.model_validate(meta["link"])
    assert link_bytes_between(link, 5.0, 6.0) == 0  # what utilisation and goodput count against
    ss = pd.read_parquet(run / "ss.parquet")
    # nothing acknowledged once what was on the wire at 5 s is (a queue of at most 2.5 BDP: 70 ms):
    # every sample from 5.1 s to the end of the outage reads the same count (the samples, not an
    # interpolation, which would spread the last ACKs before 5.1 s over the interval after it)
    during = ss[(ss["flow"] == 0) & (ss["t_s"] >= 5.1) & (ss["t_s"] <= 6.0)]["bytes_acked"]
    assert len(during) >= 5 and during.nunique() == 1, during.tolist()
    # the receiver port's loss qdisc dropped what the sender tried meanwhile, and nothing before
    loss = pd.read_parquet(run / "qdisc.parquet")
    loss = loss[loss["role"] == "loss"].sort_values("t_s")
    assert counter_growth(loss[loss["t_s"] < 5.0]["drops"]) == 0
    assert counter_growth(loss[(loss["t_s"] > 4.9) & (loss["t_s"] < 6.2)]["drops"]) > 0
    # and the flow fills the link again within the second after it
    payload_rate = link_bytes_between(link, 7.5, 9.5) / 2 * 1448 / 1514
    assert acked_within(ss, 0, 7.5, 9.5) / 2 >= 0.9 * payload_rate
