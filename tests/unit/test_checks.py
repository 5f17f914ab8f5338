"""Emulation-health checks on small hand-computed tables and on the recorded fixture run."""

import json
import shutil

import pandas as pd
import pytest

from cctest.analysis import checks
from cctest.analysis.derived import counter_growth, union_length
from cctest.analysis.ingest import ingest_run
from cctest.model.record import RunRecord
from tests import REPO

RAW = REPO / "tests" / "fixtures" / "raw"  # recorded in a VM; see its README
PAYLOAD = 1448 / 1514  # MSS / Ethernet frame at MTU 1500: the most payload a link rate carries


def make_record(rate_mbps=20.0, rtts=(20.0, 20.0), **more):
    return RunRecord.model_validate({
        "run_id": "r1",
        "link": {"rate_mbps": rate_mbps},
        "flows": [{"flow": i, "rtt_ms": rtt, "start_s": 5.0 * i, "launched_s": 5.0 * i + 0.01,
                   "duration_s": 10.0, "server_port": 5201 + i} for i, rtt in enumerate(rtts)],
        **more,
    })


def make_tables(rx_bytes=(20_000_000, 10_000_000), ping_ms=((20.1, 19.9, 20.3), (20.0, 21.0, 55.0)),
                qdisc_rows=None):
    """Two flows: flow 0 active 0..10 s, flow 1 active 5..15 s -> 15 s with >=1 flow active."""
    flows = pd.DataFrame({"flow": [0, 1], "bytes_sent": [rx_bytes[0] * 1.01, rx_bytes[1] * 1.01],
                          "bytes_received": list(rx_bytes)})
    throughput = pd.DataFrame({"flow": [0] * 10 + [1] * 10,
                               "t_s": [float(t) for t in range(1, 11)] + [float(t) for t in range(6, 16)],
                               "interval_s": [1.0] * 20})
    ping = pd.DataFrame([{"flow": i, "seq": s, "rtt_ms": v}
                         for i, vals in enumerate(ping_ms) for s, v in enumerate(vals, 1)])
    if qdisc_rows is None:
        qdisc_rows = [
            # t_s, iface, role, kind, handle, parent, drops
            (0.0, "s-eth0", "delay", "netem", "1:", "root", 0),
            (9.0, "s-eth0", "delay", "netem", "1:", "root", 0),
            (0.0, "r-eth1", "bottleneck", "htb", "1:", "root", 10),
            (0.0, "r-eth1", "bottleneck", "bfifo", "10:", "1:10", 10),
            (9.0, "r-eth1", "bottleneck", "htb", "1:", "root", 40),
            (9.0, "r-eth1", "bottleneck", "bfifo", "10:", "1:10", 40),
        ]
    qdisc = pd.DataFrame(qdisc_rows, columns=["t_s", "iface", "role", "kind", "handle", "parent",
                                              "drops"])
    return {"flows": flows, "throughput": throughput, "ping": ping, "qdisc": qdisc}


def by_name(result, name):
    return [c for c in result["checks"] if c["name"] == name]


def test_good_run_passes_with_hand_computed_values():
    rx = (20_000_000, 15_625_000)  # 35.625e6 B * 8 / 15 s = 19.0 Mbit/s of payload
    res = checks.evaluate(make_record(), make_tables(rx_bytes=rx))
    assert res["verdict"] == "pass", res
    (g,) = by_name(res, "goodput")
    # of the 20 * 1448 / 1514 = 19.13 Mbit/s of payload a 20 Mbit/s link carries
    assert g["ok"] is True and g["measured"] == pytest.approx(0.95 / PAYLOAD, abs=1e-4)
    rtt0, rtt1 = by_name(res, "base_rtt")
    assert rtt0["measured"] == pytest.approx(19.9) and rtt0["ok"] is True
    assert rtt1["measured"] == pytest.approx(20.0)  # the floor; the 55 ms outlier is jitter
    assert "median 21.000 ms" in rtt1["detail"]
    (bn,) = by_name(res, "bottleneck_drops")
    assert bn["measured"] == 30  # root htb only: 40 - 10, the bfifo leaf is not added again
    (out,) = by_name(res, "drops_outside_bottleneck")
    assert out["ok"] is True and out["measured"] == 0


def test_low_goodput_only_warns_and_reports_ratio():
    res = checks.evaluate(make_record(), make_tables(rx_bytes=(10_000_000, 5_000_000)))
    (g,) = by_name(res, "goodput")
    assert g["ok"] is False
    assert g["measured"] == pytest.approx(15e6 * 8 / 15 / 20e6 / PAYLOAD, abs=1e-4)  # 0.42
    assert res["verdict"] == "warn"


def test_goodput_above_link_rate_fails():
    res = checks.evaluate(make_record(rate_mbps=10.0), make_tables(rx_bytes=(20_000_000, 15_625_000)))
    (g,) = by_name(res, "goodput")
    assert g["measured"] == pytest.approx(1.9 / PAYLOAD, abs=1e-4)
    assert res["verdict"] == "fail"


def test_missing_receiver_total_falls_back_to_sender_total():
    t = make_tables(rx_bytes=(20_000_000, 15_625_000))
    t["flows"].loc[1, "bytes_received"] = float("nan")
    res = checks.evaluate(make_record(), t)
    (g,) = by_name(res, "goodput")
    assert g["measured"] == pytest.approx((20e6 + 15_625_000 * 1.01) * 8 / 15 / 20e6 / PAYLOAD, rel=1e-4)
    assert "sender total used" in g["detail"]


def test_base_rtt_off_by_more_than_ten_percent_fails():
    res = checks.evaluate(make_record(rtts=(20.0, 40.0)),
                          make_tables(rx_bytes=(20_000_000, 15_625_000)))
    rtt0, rtt1 = by_name(res, "base_rtt")
    assert rtt0["ok"] is True and rtt1["ok"] is False and rtt1["expected"] == 40.0
    assert res["verdict"] == "fail"


def test_base_rtt_tolerance_boundary():
    ok = checks.evaluate(make_record(rtts=(20.0,)), {"ping": pd.DataFrame(
        {"flow": [0, 0], "seq": [1, 2], "rtt_ms": [21.9, 40.0]})})
    bad = checks.evaluate(make_record(rtts=(20.0,)), {"ping": pd.DataFrame(
        {"flow": [0], "seq": [1], "rtt_ms": [22.1]})})
    assert by_name(ok, "base_rtt")[0]["ok"] is True
    assert by_name(bad, "base_rtt")[0]["ok"] is False


def dropping_qdisc_beside_a_quiet_bottleneck(iface: str, role: str, drops: int) -> dict:
    """A run's checks where one netem qdisc dropped `drops` packets over 9 s and the bottleneck none."""
    rows = [
        (0.0, iface, role, "netem", "1:", "root", 0),
        (9.0, iface, role, "netem", "1:", "root", drops),
        (0.0, "r-eth1", "bottleneck", "htb", "1:", "root", 0),
        (9.0, "r-eth1", "bottleneck", "htb", "1:", "root", 0),
    ]
    return checks.evaluate(make_record(), make_tables(rx_bytes=(20_000_000, 15_625_000), qdisc_rows=rows))


def test_drops_outside_bottleneck_fail():
    res = dropping_qdisc_beside_a_quiet_bottleneck("s-eth0", "delay", 3)
    (out,) = by_name(res, "drops_outside_bottleneck")
    assert out["ok"] is False and out["measured"] == 3
    assert "s-eth0" in out["detail"]
    assert res["verdict"] == "fail"


def test_drops_of_the_scenarios_random_loss_are_modelled_not_a_fault():
    res = dropping_qdisc_beside_a_quiet_bottleneck("ccs2-rcv0", "loss", 2900)
    (out,) = by_name(res, "drops_outside_bottleneck")
    (modelled,) = by_name(res, "modelled_loss_drops")
    assert out["ok"] is True and out["measured"] == 0
    assert modelled["measured"] == 2900 and "ccs2-rcv0" in modelled["detail"]


def test_counter_growth_survives_reset():
    # 5 -> 8 (+3), reset, 2 (+2 since the reset), 6 (+4): 9 in total
    assert counter_growth(pd.Series([5.0, 8.0, 2.0, 6.0])) == 9.0
    assert counter_growth(pd.Series([7.0])) == 0.0


def test_union_length_of_overlapping_spans():
    assert union_length([(0, 10), (5, 15), (20, 21)]) == 16
    assert union_length([]) == 0


def test_missing_tables_give_null_checks_and_warn():
    res = checks.evaluate(make_record(), {"flows": make_tables()["flows"]})
    assert res["verdict"] == "warn"
    assert all(c["ok"] is None for c in by_name(res, "base_rtt"))
    assert by_name(res, "drops_outside_bottleneck")[0]["ok"] is None


def test_recorded_run_checks(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RAW, run / "raw")
    shutil.move(run / "raw" / "meta.json", run / "meta.json")
    tables = ingest_run(run)
    record = RunRecord.model_validate(json.loads((run / "meta.json").read_text()))
    res = checks.write_checks(run, record, tables)
    on_disk = json.loads((run / "checks.json").read_text())
    assert on_disk == res
    assert on_disk["verdict"] in ("pass", "warn", "fail")
    assert [c["name"] for c in on_disk["checks"]] == [
        "base_rtt", "base_rtt", "goodput", "drops_outside_bottleneck", "bottleneck_drops", "modelled_loss_drops",
        "cpu_busy"]
    for c in on_disk["checks"]:
        assert set(c) == {"name", "ok", "measured", "expected", "detail"}
    # the netem qdiscs dropped nothing in the recording; the bottleneck's htb root did
    q = tables["qdisc"]
    htb = q[(q["kind"] == "htb")].sort_values("t_s")["drops"]
    (bn,) = by_name(on_disk, "bottleneck_drops")
    assert bn["measured"] == htb.iloc[-1] - htb.iloc[0]
    assert by_name(on_disk, "drops_outside_bottleneck")[0]["ok"] is True
    # recorded pings: minima 22.0 ms (+10.0 %, on the boundary) and 21.4 ms (+7 %)
    assert [c["measured"] for c in by_name(on_disk, "base_rtt")] == [22.0, 21.4]
    assert [c["ok"] for c in by_name(on_disk, "base_rtt")] == [True, True]
    assert on_disk["verdict"] == "warn"  # low goodput: flow 1 was interrupted
    # flow 0 ran 0.318 .. 45.48 s and covers flow 1; flow 1's receiver total is missing
    # (interrupted), so its sender total stands in
    (g,) = by_name(on_disk, "goodput")
    assert g["measured"] == pytest.approx((8887824 + 3795208) * 8 / 45.163372 / 20e6 / PAYLOAD, abs=1e-4)


def test_goodput_span_prefers_iperf3_elapsed_time():
    t = make_tables(rx_bytes=(20_000_000, 15_625_000))
    # iperf3 says flow 1 ran only 2 s (interrupted): active span 0..10 s (flow 0) -> 10 s
    t["flows"]["launched_s"] = [0.0, 5.0]
    t["flows"]["elapsed_s"] = [10.0, 2.0]
    res = checks.evaluate(make_record(), t)
    (g,) = by_name(res, "goodput")
    assert g["measured"] == pytest.approx(35_625_000 * 8 / 10 / 20e6 / PAYLOAD, abs=1e-4)


def test_goodput_counts_what_was_acked_while_flows_ran_not_the_later_drain():
    t = make_tables(rx_bytes=(20_000_000, 15_625_000))
    t["flows"]["launched_s"] = [0.0, 5.0]
    t["flows"]["elapsed_s"] = [10.0, 10.0]
    # each sender's bytes_acked grows 1 MB/s over its 10 s, then its socket drains 0.5 MB more
    # after iperf3 stopped: the receiver's totals include the drain, the active span does not
    rows = []
    for flow, start in ((0, 0.0), (1, 5.0)):
        for k in range(0, 121):
            t_s = start + k / 10
            acked = min(k / 10, 10.0) * 1e6 + (0.5e6 if k / 10 >= 11 else 0)
            rows.append({"flow": flow, "t_s": t_s, "bytes_acked": acked})
    t["ss"] = pd.DataFrame(rows)
    res = checks.evaluate(make_record(), t)
    (g,) = by_name(res, "goodput")
    assert g["measured"] == pytest.approx(20e6 * 8 / 15 / 20e6 / PAYLOAD, abs=1e-4)


def cpu_table(busy_fracs, interval_s=0.5, start_s=0.0):
    """The all-CPUs row of the cpu table, one interval after another from start_s."""
    ends = [start_s + interval_s * (k + 1) for k in range(len(busy_fracs))]
    return pd.DataFrame({"t_s": ends, "cpu": ["cpu"] * len(ends), "interval_s": [interval_s] * len(ends),
                         "busy_frac": list(busy_fracs)})


def test_cpu_busy_passes_with_slack_and_warns_when_saturated():
    record = make_record(vm={"clock": "virtual"}, mode="vm")
    tables = make_tables(rx_bytes=(20_000_000, 15_625_000))
    # flows are active 0.01..15.01 s: 30 intervals inside, the last one (15.0..15.5) outside
    relaxed = checks.evaluate(record, {**tables, "cpu": cpu_table([0.6] * 30 + [1.0])})
    check = next(c for c in relaxed["checks"] if c["name"] == "cpu_busy")
    assert check["ok"] and check["measured"] == pytest.approx(0.6) and relaxed["verdict"] == "pass"
    saturated = checks.evaluate(record, {**tables, "cpu": cpu_table([0.5] * 2 + [0.99] * 28)})
    check = next(c for c in saturated["checks"] if c["name"] == "cpu_busy")
    # time-weighted: (2 * 0.5 + 28 * 0.99) / 30 = 0.957
    assert check["ok"] is False and check["measured"] == pytest.approx((1 + 28 * 0.99) / 30, abs=1e-4)
    assert saturated["verdict"] == "warn" and "CPU-bound" in check["detail"]


def test_missing_cpu_samples_warn_only_for_runs_that_should_have_them():
    tables = make_tables(rx_bytes=(20_000_000, 15_625_000))
    assert checks.evaluate(make_record(vm=None), tables)["verdict"] == "warn"
    old = checks.evaluate(make_record(), tables)  # recorded before CPU sampling existed
    assert old["verdict"] == "pass"
    assert next(c for c in old["checks"] if c["name"] == "cpu_busy")["ok"] is None


@pytest.mark.parametrize("shift, busy, ok", [(0, 0.598, True), (1, 1.0, False)])
def test_cpu_check_on_recorded_vm_runs_tells_a_saturated_guest(shift, busy, ok):
    # 6 flows at 100 Mbit/s on the virtual clock: a guest CPU at 1 ns per instruction has slack,
    # one at 2 ns per instruction is busy all the time (bench/vm_clock.py, tests/fixtures/cpu)
    from cctest.analysis.ingest import build_tables

    fixture = REPO / "tests" / "fixtures" / "cpu" / f"shift{shift}"
    record = RunRecord.model_validate(json.loads((fixture / "meta.json").read_text()))
    tables = build_tables(record, {"cpu.jsonl": (fixture / "cpu.jsonl").read_text()})
    check, severity = checks.check_cpu_busy(record, tables["cpu"], None, None)
    assert check["ok"] is ok and check["measured"] == pytest.approx(busy, abs=0.002)
    assert severity == checks.WARN
