"""Parsers and ingest_run, on recorded captures (tests/fixtures/raw, see its README) and on small
hand-written cases."""

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cctest import ingest
from cctest.ingest import (COLUMNS, build_tables, ingest_run, parse_cc_state, parse_iperf3_json,
                           parse_ping, parse_qdisc_log, parse_rate, parse_ss_info, parse_ss_log,
                           parse_tcp_probe)

RAW = Path(__file__).parent / "fixtures" / "raw"


def raw(name: str) -> str:
    return (RAW / name).read_text()


@pytest.fixture
def run_dir(tmp_path):
    """A run directory made of the recorded raw files and the recording's meta.json."""
    run = tmp_path / "run"
    shutil.copytree(RAW, run / "raw")
    shutil.move(run / "raw" / "meta.json", run / "meta.json")
    return run


@pytest.fixture
def meta():
    return json.loads(raw("meta.json"))


# --------------------------------------------------------------------------------------------
# units and ss info lines (hand-written)

@pytest.mark.parametrize("text,bps", [
    ("19.2Mbps", 19.2e6), ("1.2Gbps", 1.2e9), ("840Kbps", 840e3), ("123bps", 123.0),
    ("26214390624bps", 26214390624.0),
])
def test_parse_rate_units(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["", "19.2", "Mbps", "fast"])
def test_parse_rate_rejects_garbage(text):
    assert math.isnan(parse_rate(text))


def test_ss_info_fields_and_units():
    line = ("\t bbr wscale:7,7 rto:224 rtt:10.5/2.1 ato:40 mss:1448 cwnd:90 ssthresh:30 "
            "bytes_acked:1000 bytes_retrans:2896 "
            "bbr:(bw:19.6Mbps,mrtt:10.2,pacing_gain:1.25,cwnd_gain:2) send 45.1Mbps "
            "pacing_rate 1.2Gbps delivery_rate 19.2Mbps busy:252ms rwnd_limited:4ms(1.6%) "
            "retrans:0/5 lost:2 minrtt:10.1")
    got = parse_ss_info(line)
    assert got == pytest.approx({
        "srtt_ms": 10.5, "rttvar_ms": 2.1, "mss": 1448, "cwnd": 90, "ssthresh": 30,
        "bytes_acked": 1000, "bytes_retrans": 2896, "bbr_bw_bps": 19.6e6, "bbr_mrtt_ms": 10.2,
        "bbr_pacing_gain": 1.25, "bbr_cwnd_gain": 2.0, "pacing_rate_bps": 1.2e9,
        "delivery_rate_bps": 19.2e6, "retrans_total": 5, "lost": 2, "min_rtt_ms": 10.1})


def test_ss_info_missing_fields_are_absent():
    got = parse_ss_info("\t cubic wscale:7,7 rto:204 rtt:0.047/0.034 mss:32768 cwnd:10")
    assert set(got) == {"srtt_ms", "rttvar_ms", "mss", "cwnd"}
    assert "send_bps" not in got and got["cwnd"] == 10


# --------------------------------------------------------------------------------------------
# cc_state (hand-written: no module with a <cc>:state tracepoint exists to record from yet)

def test_cc_state_lines_long_format_and_x1000():
    text = ("Attaching 2 probes...\n"
            "P 100 40000 5201 10 20 30000 1000 2000\n"
            "S bbr1 2000000000 40000 5201 mode=2 pacing_gain_x1000=1250 bw=1234 junk\n"
            "S bbr1 notanumber 40000 5201 mode=1\n")
    df = parse_cc_state(text)
    assert list(df.columns) == ["t_ns", "cc", "sport", "dport", "key", "value"]
    assert df[["key", "value"]].values.tolist() == [["mode", 2.0], ["pacing_gain", 1.25],
                                                     ["bw", 1234.0]]
    assert (df["t_ns"] == 2_000_000_000).all() and (df["cc"] == "bbr1").all()


def test_tcp_probe_ignores_other_lines_and_converts_srtt():
    text = "Attaching 1 probe...\nS bbr 5 1 2 a=1\nP 100 40000 5201 10 20 30500 1000 2000\nP 1 2\n"
    df = parse_tcp_probe(text)
    assert len(df) == 1
    assert df.iloc[0].to_dict() == {"t_ns": 100, "sport": 40000, "dport": 5201, "snd_cwnd": 10,
                                    "ssthresh": 20, "srtt_ms": 30.5, "snd_wnd": 1000,
                                    "rcv_wnd": 2000}


# --------------------------------------------------------------------------------------------
# flow mapping (hand-written ss text: a control and a data connection in each block)

SS_TWO_SOCKETS = """\
@2000000000 flow=0
0      0      10.0.1.1:40660 10.0.2.1:5201
\t cubic wscale:7,7 rto:224 rtt:22.1/5 mss:1448 cwnd:10 bytes_acked:165
0      87000  10.0.1.1:40668 10.0.2.1:5201
\t bbr rtt:30.5/2.5 mss:1448 cwnd:45 bytes_acked:900000 delivery_rate 19.1Mbps
@2500000000 flow=0
0      0      10.0.1.1:40660 10.0.2.1:5201
\t cubic rtt:22.1/5 mss:1448 cwnd:10 bytes_acked:165
0      87000  10.0.1.1:40668 10.0.2.1:5201
\t bbr rtt:31.0/2.0 mss:1448 cwnd:50 bytes_acked:1900000 delivery_rate 19.3Mbps
@3000000000 flow=1
"""


def hand_meta(**flow0):
    f0 = {"flow": 0, "cc": "bbr", "rtt_ms": 20.0, "start_s": 0.0, "launched_s": 0.5,
          "duration_s": 2.0, "server_port": 5201, "sender_ip": "10.0.1.1"}
    f0.update(flow0)
    return {"run_id": "hand", "t0_monotonic_ns": 1_000_000_000, "flows": [f0]}


def test_ss_mapping_keeps_only_the_data_connection():
    iperf = json.dumps({"start": {"connected": [{"local_port": 40668, "remote_port": 5201}]}})
    tables = build_tables(hand_meta(), {"ss.log": SS_TWO_SOCKETS, "iperf3-0.json": iperf})
    ss = tables["ss"]
    assert list(ss.columns) == COLUMNS["ss"]
    assert ss["cwnd"].tolist() == [45.0, 50.0]            # never the control socket's 10
    assert ss["t_s"].tolist() == pytest.approx([1.0, 1.5])  # (t_ns - t0) / 1e9
    assert ss["delivery_rate_bps"].tolist() == pytest.approx([19.1e6, 19.3e6])
    assert ss["ssthresh"].isna().all()                     # not reported -> NaN
    assert tables["flows"]["local_port"].tolist() == [40668]


def test_ss_mapping_without_iperf3_json_picks_busiest_socket():
    tables = build_tables(hand_meta(), {"ss.log": SS_TWO_SOCKETS, "iperf3-0.json": None})
    assert tables["ss"]["cwnd"].tolist() == [45.0, 50.0]
    assert tables["flows"]["local_port"].tolist() == [40668]
    assert "throughput" not in tables


def test_absent_inputs_omit_tables_but_keep_flows():
    tables = build_tables(hand_meta(), {})
    assert list(tables) == ["flows"]
    flows = tables["flows"]
    assert list(flows.columns) == COLUMNS["flows"]
    assert flows["bytes_sent"].isna().all() and flows["local_port"].isna().all()


# --------------------------------------------------------------------------------------------
# iperf3: truncated and empty output (hand-cut from a recorded file)

def test_iperf3_empty_output_does_not_crash():
    r = parse_iperf3_json("")
    assert r.local_port is None and r.intervals.empty and math.isnan(r.bytes_sent)
    assert not r.complete


def test_iperf3_truncated_keeps_start_and_complete_intervals():
    text = raw("iperf3-0.json")
    full = parse_iperf3_json(text)
    cut = text.index('"intervals"')
    # cut in the middle of the fourth interval
    pos = cut
    for _ in range(4):
        pos = text.index('"streams"', pos + 1)
    r = parse_iperf3_json(text[:pos + 40])
    assert not r.complete and full.complete
    assert r.local_port == full.local_port
    assert len(r.intervals) == 3
    pd.testing.assert_frame_equal(r.intervals, full.intervals.iloc[:3])
    assert math.isnan(r.bytes_sent) and math.isnan(r.bytes_received)


def test_iperf3_truncated_inside_start_gives_nothing_but_no_crash():
    text = raw("iperf3-0.json")
    r = parse_iperf3_json(text[:text.index('"local_port"') + 5])
    assert r.local_port is None and r.intervals.empty


# --------------------------------------------------------------------------------------------
# parsers on the recorded captures

def test_ss_log_recorded_values():
    df = parse_ss_log(raw("ss.log"))
    # six blocks; flows 0 and 1 had two sockets each in their first two blocks, then none
    assert len(df) == 6
    assert df.groupby("t_ns").size().to_dict() == {217401909950: 2, 235482668500: 2,
                                                   249785880590: 2}
    first = df.iloc[0]
    assert (first["flow"], first["local_ip"], first["local_port"], first["peer_ip"],
            first["peer_port"]) == (0, "10.0.1.1", 40820, "10.0.2.1", 5201)
    assert first[SS_VALUES].to_dict() == pytest.approx({
        "cwnd": 28, "ssthresh": 28, "srtt_ms": 47.194, "rttvar_ms": 8.967, "min_rtt_ms": 21.653,
        "mss": 1448, "bytes_acked": 2393582, "bytes_retrans": 47784, "retrans_total": 33,
        "delivery_rate_bps": 1253136, "pacing_rate_bps": 2502664, "bbr_bw_bps": 2022352,
        "bbr_mrtt_ms": 21.653, "bbr_pacing_gain": 1.25, "bbr_cwnd_gain": 2})
    assert math.isnan(first["lost"])
    # the iperf3 control connection (cubic, 185 bytes acked) is parsed too, without bbr fields
    ctrl = df.iloc[1]
    assert ctrl["local_port"] == 40810 and ctrl["bytes_acked"] == 185
    assert math.isnan(ctrl["bbr_bw_bps"]) and math.isnan(ctrl["ssthresh"])


SS_VALUES = [c for c in ingest.SS_METRICS if c != "lost"]


def test_qdisc_log_recorded_values():
    df = parse_qdisc_log(raw("qdisc.log"))
    # 3 rounds x (netem + htb + bfifo + netem)
    assert len(df) == 12
    assert df["kind"].tolist()[:4] == ["netem", "htb", "bfifo", "netem"]
    assert df["role"].tolist()[:4] == ["delay", "bottleneck", "bottleneck", "delay"]
    assert df["parent"].tolist()[:4] == ["root", "root", "1:10", "root"]
    first = df.iloc[0]
    assert first["t_ns"] == 238991344290 and first["iface"] == "s-eth0"
    assert (first["sent_bytes"], first["sent_pkts"], first["backlog_bytes"],
            first["backlog_pkts"], first["drops"]) == (7065237, 4710, 15140, 5, 0)
    htb = df[df["kind"] == "htb"].iloc[0]
    assert (htb["drops"], htb["overlimits"], htb["sent_bytes"]) == (90, 2955, 8076854)


def test_qdisc_log_skips_broken_json():
    text = "@5 iface=x role=other [{\"kind\":\"fq\"\n@6 iface=x role=other []\ngarbage\n"
    assert parse_qdisc_log(text).empty


def test_tcp_probe_recorded_values():
    df = parse_tcp_probe(raw("bpftrace.log"))
    assert set(df["sport"]) == {40810, 40820, 57468, 57472}  # data and control connections
    first = df.iloc[0]
    assert (first["t_ns"], first["sport"], first["dport"], first["snd_cwnd"]) == (
        219062055030, 40810, 5201, 10)
    assert first["srtt_ms"] == pytest.approx(46.176)      # 46176 us
    assert math.isnan(first["ssthresh"])                  # 2147483647: not yet set
    assert (first["snd_wnd"], first["rcv_wnd"]) == (65160, 64256)
    assert parse_cc_state(raw("bpftrace.log")).empty      # no S lines in this recording


def test_iperf3_recorded_complete_flow():
    r = parse_iperf3_json(raw("iperf3-0.json"))
    assert r.complete and r.error is None
    assert (r.local_port, r.remote_port) == (40820, 5201)
    assert (r.bytes_sent, r.bytes_received, r.retransmits) == (9568384, 8887824, 58)
    assert r.mean_rtt_ms == pytest.approx(108.256)
    assert r.max_snd_cwnd_bytes == 78192
    assert len(r.intervals) == 6
    iv = r.intervals.iloc[0]
    assert iv.to_dict() == pytest.approx({
        "t_rel_s": 0.103136, "interval_s": 0.10313600301742554, "bytes": 331592,
        "bits_per_second": iv["bits_per_second"], "retransmits": 0, "snd_cwnd_bytes": 34752,
        "rtt_ms": 45.378})
    assert iv["bits_per_second"] == pytest.approx(331592 * 8 / 0.103136, rel=1e-6)


def test_iperf3_recorded_interrupted_flow():
    r = parse_iperf3_json(raw("iperf3-1.json"))
    assert r.error.startswith("interrupt")
    assert r.local_port == 57472
    assert r.bytes_sent == 3795208 and r.retransmits == 68
    assert math.isnan(r.bytes_received)  # iperf3 says 0: the server's totals never arrived


def test_iperf3_interrupted_before_test_start_has_no_intervals():
    # as recorded in an earlier VM run: SIGINT before the test began; the interval and totals
    # are measured from an unset start time (seconds since boot)
    d = json.loads(raw("iperf3-1.json"))
    del d["start"]["test_start"]
    d["intervals"] = d["intervals"][:1]
    d["intervals"][0]["sum"]["end"] = 154.923895
    r = parse_iperf3_json(json.dumps(d))
    assert r.local_port == 57472 and r.intervals.empty and math.isnan(r.sender_seconds)


def test_ping_recorded_values():
    df = parse_ping(raw("ping-0.txt"))
    assert df["seq"].tolist() == [1, 2, 3, 4, 5]
    assert df["rtt_ms"].tolist() == [110.0, 22.5, 22.2, 22.0, 23.4]  # "time=110 ms" too
    assert parse_ping("PING x\n\n--- x ping statistics ---\n").empty


# --------------------------------------------------------------------------------------------
# ingest_run on the recorded run

def test_ingest_run_writes_contract_tables(run_dir, meta):
    tables = ingest_run(run_dir)
    assert list(tables) == ["flows", "throughput", "ss", "tcp_probe", "qdisc", "ping"]
    for name, df in tables.items():
        on_disk = pd.read_parquet(run_dir / f"{name}.parquet")
        assert list(on_disk.columns) == COLUMNS[name], name
        assert len(on_disk) == len(df) and (on_disk["run_id"] == meta["run_id"]).all()
        if "t_s" in COLUMNS[name]:
            assert on_disk["t_s"].dtype == "float64"
    assert not (run_dir / "cc_state.parquet").exists()


def test_ingest_run_flows(run_dir):
    flows = ingest_run(run_dir)["flows"]
    assert flows["flow"].tolist() == [0, 1]
    assert flows["local_port"].tolist() == [40820, 57472]
    assert flows["bytes_sent"].tolist() == [9568384, 3795208]
    assert flows["bytes_received"].iloc[0] == 8887824 and pd.isna(flows["bytes_received"].iloc[1])
    assert flows["launched_s"].tolist() == pytest.approx([0.318243, 6.585896])
    assert flows["elapsed_s"].tolist() == pytest.approx([45.163372, 17.514011])


def test_ingest_run_throughput_time_is_launch_plus_interval_end(run_dir):
    tp = ingest_run(run_dir)["throughput"]
    f1 = tp[tp["flow"] == 1]
    assert f1["t_s"].iloc[0] == pytest.approx(6.585896 + 0.131861)
    assert f1["bytes"].iloc[0] == 259192
    assert len(tp) == 12


def test_ingest_run_maps_ss_and_probe_to_data_connections(run_dir, meta):
    tables = ingest_run(run_dir)
    ss = tables["ss"]
    t0 = meta["t0_monotonic_ns"]
    # one data-connection row per block that had sockets; control connections dropped
    assert ss["flow"].tolist() == [0, 1, 0]
    assert ss["t_s"].tolist() == pytest.approx([(217401909950 - t0) / 1e9,
                                                (235482668500 - t0) / 1e9,
                                                (249785880590 - t0) / 1e9])
    assert ss["bytes_acked"].tolist() == [2393582, 2021446, 5987518]
    probe = tables["tcp_probe"]
    assert probe.groupby("flow").size().to_dict() == {0: 15, 1: 15}  # not the 15 + 8 control
    assert probe["t_s"].min() > 0


def test_ingest_run_without_bpftrace_or_ss(run_dir):
    (run_dir / "raw" / "bpftrace.log").unlink()
    (run_dir / "raw" / "ss.log").unlink()
    tables = ingest_run(run_dir)
    assert "tcp_probe" not in tables and "ss" not in tables
    assert not (run_dir / "tcp_probe.parquet").exists()
    assert tables["flows"]["local_port"].tolist() == [40820, 57472]  # from iperf3


def test_ingest_run_with_truncated_and_missing_iperf3(run_dir):
    p0 = run_dir / "raw" / "iperf3-0.json"
    text = p0.read_text()
    p0.write_text(text[: len(text) // 2])
    (run_dir / "raw" / "iperf3-1.json").unlink()
    tables = ingest_run(run_dir)
    flows = tables["flows"]
    assert flows["local_port"].tolist() == [40820, 57472]  # flow 1 via busiest ss socket
    assert flows["bytes_sent"].isna().all()
    assert set(tables["throughput"]["flow"]) == {0}
    assert 0 < len(tables["throughput"]) < 6


def test_throughput_falls_back_to_scheduled_start_without_launch_time():
    meta = hand_meta(launched_s=None, start_s=3.0)
    iperf = raw("iperf3-0.json")
    tp = build_tables(meta, {"iperf3-0.json": iperf})["throughput"]
    assert tp["t_s"].iloc[0] == pytest.approx(3.0 + 0.103136)


def test_run_that_ended_before_time_zero_keeps_only_flows(tmp_path):
    """A run that failed or was interrupted during set-up has no t0: no sample can be placed."""
    src = Path(__file__).parent / "fixtures" / "raw"
    run = tmp_path / "run"
    (run / "raw").mkdir(parents=True)
    meta = json.loads((src / "meta.json").read_text())
    meta["t0_monotonic_ns"] = None
    (run / "meta.json").write_text(json.dumps(meta))
    tables = ingest_run(run)
    assert sorted(tables) == ["flows"]
    assert list(tables["flows"]["flow"]) == [0, 1]
    assert (run / "flows.parquet").exists() and not (run / "ss.parquet").exists()
