"""cctest.analysis.metrics on hand-computed cases."""

import math

import numpy as np
import pandas as pd
import pytest

from cctest.analysis import derived as D, metrics as M, stats
from cctest.model.record import RunRecord
from tests.report_fixtures import FlowSpec, RunSpec, make_run


def tp_table(rows):
    """rows: (flow, t_end, interval_s, bytes[, retransmits])."""
    return pd.DataFrame([{"run_id": "r", "flow": r[0], "t_s": r[1], "interval_s": r[2], "bytes": r[3],
                          "retransmits": r[4] if len(r) > 4 else 0} for r in rows])


def test_jain_hand_cases():
    assert stats.jain_index([10, 10]) == 1.0
    assert stats.jain_index([10, 0]) == 0.5
    assert stats.jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    assert stats.jain_index([5, 5, 5, 5]) == 1.0
    assert stats.jain_index([7, 0, 0, 0]) == 0.25
    assert math.isnan(stats.jain_index([]))
    assert math.isnan(stats.jain_index([0, 0]))
    assert stats.jain_index([10, float("nan"), 10]) == 1.0


def test_t_quantile_and_ci_on_known_samples():
    assert stats.t_quantile_975(1) == 12.706
    assert stats.t_quantile_975(9) == 2.262
    assert stats.t_quantile_975(60) == pytest.approx(2.000, abs=2e-3)
    assert stats.t_quantile_975(120) == pytest.approx(1.980, abs=2e-3)
    mean, hw, n = stats.mean_ci95([1, 2, 3, 4, 5])
    # s = sqrt(2.5); hw = 2.776 * s / sqrt(5)
    assert (mean, n) == (3.0, 5)
    assert hw == pytest.approx(2.776 * math.sqrt(2.5) / math.sqrt(5))
    assert hw == pytest.approx(1.9632, abs=1e-3)
    mean, hw, n = stats.mean_ci95([4.0, 4.0, 4.0])
    assert (mean, hw, n) == (4.0, 0.0, 3)
    mean, hw, n = stats.mean_ci95([7.0])
    assert mean == 7.0 and math.isnan(hw) and n == 1


def test_throughput_from_known_byte_counts():
    # 10 Mbit/s = 125000 bytes per 100 ms interval, for 1 s.
    tp = tp_table([(0, 0.1 * (i + 1), 0.1, 125_000) for i in range(10)])
    b = M.binned_throughput(tp, 0.1)
    assert len(b) == 10
    assert np.allclose(b["mbps"], 10.0)
    b2 = M.binned_throughput(tp, 0.2)
    assert np.allclose(b2["bytes"], 250_000) and np.allclose(b2["mbps"], 10.0)
    b3 = M.binned_throughput(tp, 0.05)
    assert np.allclose(b3["bytes"], 62_500) and np.allclose(b3["mbps"], 10.0)
    assert b3["bytes"].sum() == pytest.approx(1_250_000)


def test_rebinning_conserves_bytes_and_respects_start():
    # Flow 1 starts at 0.5 s with uneven intervals.
    tp = tp_table([(0, 0.1, 0.1, 100), (0, 0.2, 0.1, 300), (1, 0.6, 0.1, 1000), (1, 0.7, 0.1, 3000)])
    b = M.binned_throughput(tp, 0.2)
    assert b.groupby("flow")["bytes"].sum().to_dict() == pytest.approx({0: 400, 1: 4000})
    f1 = b[b["flow"] == 1].set_index("t_s")["bytes"]
    assert f1.loc[0.0] == 0 and f1.loc[0.4] == pytest.approx(1000) and f1.loc[0.6] == pytest.approx(3000)
    assert not b[(b["flow"] == 1) & (b["t_s"] < 0.4)]["active"].any()


def test_flow_totals_prefers_receiver_bytes():
    tp = tp_table([(0, 0.1 * (i + 1), 0.1, 125_000, 1) for i in range(10)])
    flows = pd.DataFrame([{"flow": 0, "bytes_received": 1_000_000, "bytes_sent": 1_250_000,
                           "retransmits": 7}])
    t = M.flow_totals(tp, flows)
    assert t.loc[0, "bytes"] == 1_000_000
    assert t.loc[0, "bytes_intervals"] == 1_250_000
    assert t.loc[0, "retransmits"] == 7
    assert t.loc[0, "mean_mbps"] == pytest.approx(8.0)
    t2 = M.flow_totals(tp, None)
    assert t2.loc[0, "bytes"] == 1_250_000 and t2.loc[0, "retransmits"] == 10


def test_link_fullness_and_rate_schedule():
    # 20 Mbit/s for 1 s carries 2.5 MB of frames, 2.5 MB x 1448/1514 of payload.
    meta = {"link": {"rate_mbps": 20, "mtu": 1500}, "flows": [{"flow": 0, "start_s": 0, "duration_s": 1}]}
    record = RunRecord.model_validate(meta)
    pay = 2_500_000 * 1448 / 1514
    flows = pd.DataFrame({"flow": [0], "launched_s": [0.0], "elapsed_s": [1.0], "bytes_received": [pay / 2],
                          "bytes_sent": [pay]})
    full = D.link_fullness(record, {"flows": flows})
    assert full["fraction"] == pytest.approx(0.5) and full["span_s"] == pytest.approx(1.0)
    # a schedule halves the rate after 0.5 s: 0.75 of the bytes fit, so the same delivery is 2/3 full
    halved = {**meta["link"], "rate_schedule": [{"at_s": 0.5, "rate_mbps": 10}]}
    sched = RunRecord.model_validate({**meta, "link": halved})
    assert sched.link is not None
    assert D.link_rate_mbps_at(sched.link, [0.0, 0.49, 0.5, 3.0]).tolist() == [20, 20, 10, 10]
    assert D.link_bytes_between(sched.link, 0, 1) == pytest.approx(0.75 * 2_500_000)
    assert D.link_fullness(sched, {"flows": flows})["fraction"] == pytest.approx(2 / 3)
    empty = RunRecord.model_validate({"link": {}, "flows": []})
    assert math.isnan(D.link_fullness(empty, {"flows": flows})["fraction"])


def test_default_bin_is_one_rtt_but_at_least_100_ms():
    def bin_s(meta):
        return D.default_bin_s(RunRecord.model_validate(meta))

    assert bin_s({"link": {"rtt_ms": 20}, "flows": [{"rtt_ms": 20}]}) == pytest.approx(0.1)
    assert bin_s({"link": {"rtt_ms": 20}, "flows": [{"rtt_ms": 20}, {"rtt_ms": 160}]}) == pytest.approx(0.16)


def test_queueing_delay_from_backlog_and_srtt():
    # 25000 bytes at 20 Mbit/s drain in 10 ms; BDP of 20 Mbit/s x 10 ms = 25000 bytes.
    assert M.queue_delay_ms([25_000, 0], 20) == pytest.approx([10.0, 0.0])
    assert M.queue_bdp([25_000, 50_000], 25_000) == pytest.approx([1.0, 2.0])
    ss = pd.DataFrame({"flow": [0, 0, 1, 1], "t_s": [0.1, 0.2, 0.1, 0.2], "srtt_ms": [12, 15, 41, 40],
                       "min_rtt_ms": [10.5, 10, 40, 40]})
    q = M.srtt_queueing_delay(ss)
    assert q["qdelay_ms"].tolist() == pytest.approx([2, 5, 1, 0])


def test_counters_and_drop_stats():
    assert D.counter_increments([0, 2, 5, 1, 3]).tolist() == [0, 2, 3, 1, 2]  # reset at 4th
    bq = pd.DataFrame({"t_s": [0.0, 0.1, 0.2], "drops": [0, 2, 5], "sent_pkts": [0, 100, 195],
                       "role": "bottleneck", "iface": "s2"})
    d = M.drop_stats(bq)
    assert d["drops"] == 5 and d["sent_pkts"] == 195
    assert d["loss_rate"] == pytest.approx(5 / 200)
    ds = M.drops_series(bq, 0.1)
    assert ds["drops"].tolist() == [0, 2, 3]
    mixed = pd.concat([bq, bq.assign(role="delay", iface="s3", drops=[0, 9, 9])])
    assert D.bottleneck_samples(mixed)["drops"].tolist() == [0, 2, 5]
    # htb root + bfifo leaf, interleaved: the leaf (the buffer) is taken, never both.
    root = bq.assign(kind="htb", handle="1:", parent="root", drops=[0, 3, 7])
    leaf = bq.assign(kind="bfifo", handle="10:", parent="1:1")
    both = pd.concat([root, leaf]).sort_values("t_s", kind="stable")
    assert D.bottleneck_samples(both)["drops"].tolist() == [0, 2, 5]
    assert D.bottleneck_samples(root)["drops"].tolist() == [0, 3, 7]


def test_jain_series_and_group_shares():
    rows = [(f, 0.1 * (i + 1), 0.1, 125_000 if f < 2 else 0) for f in range(3) for i in range(20)]
    b = M.binned_throughput(tp_table([r for r in rows if r[0] < 2]), 0.1)
    js = M.jain_series(b, 0.5)
    assert np.allclose(js["jain"], 1.0)
    tp = tp_table([(0, 0.1 * (i + 1), 0.1, 125_000) for i in range(20)]
                  + [(1, 0.1 * (i + 1), 0.1, 0) for i in range(20)])
    js = M.jain_series(M.binned_throughput(tp, 0.1), 1.0)
    assert np.allclose(js["jain"], 0.5)
    tp = tp_table([(0, 0.1 * (i + 1), 0.1, 300) for i in range(10)]
                  + [(1, 0.1 * (i + 1), 0.1, 100) for i in range(10)])
    gs = M.group_share_series(M.binned_throughput(tp, 0.1), {0: "bbr", 1: "cubic"}, 0.5)
    assert np.allclose(gs[gs["cc"] == "bbr"]["share"], 0.75)
    assert np.allclose(gs[gs["cc"] == "cubic"]["share"], 0.25)


def test_steady_window():
    spans = pd.DataFrame({"flow": [0, 1], "t_start": [0, 2], "t_end": [30, 25]})
    assert M.steady_window(spans, 10) == (10, 25)
    assert M.steady_window(spans, 28) == (28, 30)  # falls back to the last end


def test_run_metrics_constant_rates(tmp_path):
    d = make_run(tmp_path, RunSpec(flows=[FlowSpec("bbr", 10), FlowSpec("cubic", 10)], rate_mbps=20,
                                   duration_s=10, constant_mbps=[10, 10], buffer_bdp=2))
    from cctest.analysis.load import load_run
    run = load_run(d)
    res = M.run_metrics(run.record, run.tables, skip_s=2)
    r = res.run
    assert r.jain == pytest.approx(1.0)
    assert r.jain_steady == pytest.approx(1.0)
    # the synthetic senders see 20 Mbit/s of payload acknowledged: the payload capacity of the
    # 20 Mbit/s of frames is 1448/1514 of it (the first 0.1 s before the first ss sample is missed)
    assert r.utilisation == pytest.approx(1514 / 1448, rel=0.01)
    assert [f["share"] for f in res.flows] == pytest.approx([0.5, 0.5])
    assert [f["avg_mbps_1s"] for f in res.flows] == pytest.approx([10, 10])
    assert r.bottleneck_drops == 0
    # backlog held at half of 2 BDP = 1 BDP = 25000 bytes -> 10 ms at 20 Mbit/s
    assert r.mean_queue_bdp == pytest.approx(1.0)
    assert r.mean_queue_delay_ms == pytest.approx(10.0)
    d3 = make_run(tmp_path / "b", RunSpec(flows=[FlowSpec("bbr", 10)] * 3, duration_s=10,
                                          constant_mbps=[10, 5, 5]))
    run3 = load_run(d3)
    assert M.run_metrics(run3.record, run3.tables).run.jain == pytest.approx(400 / 450)


def test_steady_jain_with_a_late_starter():
    # flow 0: 10 Mbit/s over 0-20 s; flow 1: 10 Mbit/s over 12-20 s. From 10 s on they share
    # equally while both run, so the steady-state index is 1 although flow 1 missed 10-12 s.
    tp = tp_table([(0, 0.1 * (i + 1), 0.1, 125_000) for i in range(200)]
                  + [(1, 12 + 0.1 * (i + 1), 0.1, 125_000) for i in range(80)])
    b = M.binned_throughput(tp, 0.1)
    t0, t1 = M.steady_window(M.interval_spans(tp), 10)
    assert (t0, t1) == (10, pytest.approx(20))
    means = M.window_mean_mbps(b, t0, t1)
    assert means.tolist() == pytest.approx([10, 10])
    assert stats.jain_index(means) == pytest.approx(1.0)
    # over the whole run the late starter delivered 40 % of flow 0's bytes in its 8 s
    tot = M.flow_totals(tp)
    assert tot["mean_mbps"].tolist() == pytest.approx([10, 10])
    assert M.shares(tot["bytes"]).tolist() == pytest.approx([200 / 280, 80 / 280])


def test_the_typed_rows_have_a_field_for_every_metric_of_the_table():
    """A run's row holds every per-run metric of metric_table, a cc's row every per-cc metric."""
    from dataclasses import fields

    from cctest.model.metric_table import CC_METRICS, RUN_METRICS, CcValues, RunValues

    assert {m.column for m in RUN_METRICS} <= {f.name for f in fields(RunValues)}
    assert all(hasattr(CcValues(), m.column) for m in CC_METRICS)
