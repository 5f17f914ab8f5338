"""Raw captures -> tidy tables (one row per sample, long format).

`cctest run` leaves verbatim tool output under ``<run_dir>/raw/``; this module turns it into the
parquet tables described in docs/run-directory.md.  It has two layers:

* Parsers, one per raw format, text in -> DataFrame (or plain data) out.  They know nothing about
  the run: timestamps stay raw CLOCK_MONOTONIC nanoseconds (``t_ns``) and sockets stay identified
  by their ports.  They never raise on malformed input; unreadable lines are skipped.

      parse_sock_diag      raw/ss.jsonl        tcp_info + bbr_info per socket per sample (sock_diag)
      parse_qdisc_log      raw/qdisc.log       ``@<t_ns> iface=<n> role=<r> <tc -s -j qdisc JSON>``
      parse_tcp_probe      raw/bpftrace.log    ``P <t_ns> <sport> <dport> <cwnd> ...`` lines
      parse_cc_state       raw/bpftrace.log    ``S <cc> <t_ns> <sport> <dport> k=v ...`` lines
      parse_iperf3_json    raw/iperf3-<i>.json iperf3 -J client output (possibly truncated)
      parse_ping           raw/ping-<i>.txt    ping output
      parse_cpu_stat       raw/cpu.jsonl       /proc/stat CPU counters per sample

* ``ingest_run(run_dir)`` reads meta.json, runs the parsers, maps sockets to flows, converts time
  to ``t_s`` (seconds after the run's time zero) and writes ``<table>.parquet``.

Socket -> flow mapping: flow i's data connection is the socket whose local port is iperf3's
``start.connected[0].local_port`` and whose remote port is the flow's ``server_port``.  The
iperf3 control connection shares the remote port and is dropped.  If iperf3's JSON is missing
(interrupted run) the data connection is taken to be the socket to ``server_port`` that
acknowledged the most bytes in ss.jsonl (the control connection carries a few hundred bytes).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import atomic

NS_PER_S = 1_000_000_000
US_PER_MS = 1000.0

# Table names in write order; flows is always written, the others only when their input exists.
TABLES = ("flows", "throughput", "ss", "tcp_probe", "qdisc", "cc_state", "ping", "cpu")

# Column order of every table, as in docs/run-directory.md.
COLUMNS: dict[str, list[str]] = {
    "flows": ["run_id", "flow", "cc", "rtt_ms", "start_s", "launched_s", "duration_s",
              "elapsed_s", "local_port", "server_port", "sender_ip", "bytes_sent",
              "bytes_received", "retransmits", "mean_rtt_ms", "max_snd_cwnd_bytes"],
    "throughput": ["run_id", "flow", "t_s", "interval_s", "bytes", "bits_per_second",
                   "retransmits", "snd_cwnd_bytes", "rtt_ms"],
    "ss": ["run_id", "flow", "t_s", "cwnd", "ssthresh", "srtt_ms", "rttvar_ms", "min_rtt_ms",
           "mss", "bytes_acked", "bytes_retrans", "retrans_total", "lost", "delivery_rate_bps",
           "pacing_rate_bps", "bbr_bw_bps", "bbr_mrtt_ms", "bbr_pacing_gain", "bbr_cwnd_gain"],
    "tcp_probe": ["run_id", "flow", "t_s", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd",
                  "rcv_wnd"],
    "qdisc": ["run_id", "t_s", "iface", "role", "kind", "handle", "parent", "backlog_bytes",
              "backlog_pkts", "drops", "sent_bytes", "sent_pkts", "overlimits", "requeues",
              "ecn_marks", "limit_drops"],  # an AQM's (cctest/net/bottleneck.py aqm_counters); else NaN
    "cc_state": ["run_id", "flow", "t_s", "cc", "key", "value"],
    "ping": ["run_id", "flow", "seq", "rtt_ms"],
    "cpu": ["run_id", "t_s", "cpu", "interval_s", "busy_frac"],
}

# The numeric columns of the ss table (everything after run_id, flow, t_s); NaN when absent.
SS_METRICS = COLUMNS["ss"][3:]


# --------------------------------------------------------------------------------------------
# Units

def _num(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


# --------------------------------------------------------------------------------------------
# ss

TCP_INFINITE_SSTHRESH = 0x7FFFFFFF  # include/net/tcp.h: ssthresh before the first loss
_U32_MAX = 0xFFFFFFFF
_BBR_UNIT = 256  # BBR's gain fixed point


def _or_nan(value, invalid=()) -> float:
    return math.nan if value is None or value in invalid else float(value)


def sock_diag_metrics(info: dict | None, bbr: dict | None) -> dict[str, float]:
    """The kernel's tcp_info / tcp_bbr_info (as the sampler recorded them) -> ss columns, in the
    units `ss -ti` prints: RTTs in ms, rates in bit/s, BBR gains as plain factors."""
    out = {name: math.nan for name in SS_METRICS}
    if info:
        out.update(
            cwnd=_or_nan(info.get("tcpi_snd_cwnd")),
            ssthresh=_or_nan(info.get("tcpi_snd_ssthresh"), (TCP_INFINITE_SSTHRESH,)),
            srtt_ms=_or_nan(info.get("tcpi_rtt")) / US_PER_MS,
            rttvar_ms=_or_nan(info.get("tcpi_rttvar")) / US_PER_MS,
            min_rtt_ms=_or_nan(info.get("tcpi_min_rtt"), (0, _U32_MAX)) / US_PER_MS,
            mss=_or_nan(info.get("tcpi_snd_mss")),
            bytes_acked=_or_nan(info.get("tcpi_bytes_acked")),
            bytes_retrans=_or_nan(info.get("tcpi_bytes_retrans")),
            retrans_total=_or_nan(info.get("tcpi_total_retrans")),
            lost=_or_nan(info.get("tcpi_lost")),
            delivery_rate_bps=_or_nan(info.get("tcpi_delivery_rate")) * 8,
            # ~0 means "no pacing rate set" (the kernel's initial sk_pacing_rate)
            pacing_rate_bps=_or_nan(info.get("tcpi_pacing_rate"), (2**64 - 1,)) * 8,
        )
    if bbr:
        bw_bytes = (int(bbr.get("bbr_bw_hi", 0)) << 32) | int(bbr.get("bbr_bw_lo", 0))
        out.update(
            bbr_bw_bps=bw_bytes * 8.0,
            bbr_mrtt_ms=_or_nan(bbr.get("bbr_min_rtt"), (_U32_MAX,)) / US_PER_MS,
            bbr_pacing_gain=_or_nan(bbr.get("bbr_pacing_gain")) / _BBR_UNIT,
            bbr_cwnd_gain=_or_nan(bbr.get("bbr_cwnd_gain")) / _BBR_UNIT,
        )
    return out


def parse_sock_diag(text: str) -> pd.DataFrame:
    """raw/ss.jsonl (one JSON object per socket per sample) -> one row per socket per sample.

    Columns: t_ns, flow, local_ip, local_port, peer_ip, peer_port, then SS_METRICS (NaN where
    the kernel reported nothing, e.g. no BBR block for CUBIC). Both the iperf3 control and data
    connections appear; mapping to the data connection is done by the caller. Unreadable lines
    (a sampler killed mid-write) are skipped.
    """
    rows: list[dict] = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            row = {"t_ns": int(rec["t_ns"]), "flow": int(rec["flow"]), "local_ip": rec.get("src"),
                   "local_port": int(rec["sport"]), "peer_ip": rec.get("dst"), "peer_port": int(rec["dport"])}
        except (ValueError, KeyError, TypeError):
            continue
        row.update(sock_diag_metrics(rec.get("info"), rec.get("bbr")))
        rows.append(row)
    cols = ["t_ns", "flow", "local_ip", "local_port", "peer_ip", "peer_port", *SS_METRICS]
    df = pd.DataFrame(rows, columns=cols)
    df[SS_METRICS] = df[SS_METRICS].astype("float64")
    return df


# --------------------------------------------------------------------------------------------
# qdisc

_QDISC_LINE_RE = re.compile(r"^@(\d+)\s+iface=(\S+)\s+role=(\S+)\s+(.*)$")
# tc -s -j field -> qdisc column
_QDISC_COUNTERS = {"backlog": "backlog_bytes", "qlen": "backlog_pkts", "drops": "drops",
                   "bytes": "sent_bytes", "packets": "sent_pkts", "overlimits": "overlimits",
                   "requeues": "requeues", "ecn_marks": "ecn_marks", "limit_drops": "limit_drops"}


def parse_qdisc_log(text: str) -> pd.DataFrame:
    """raw/qdisc.log -> one row per qdisc per sample.

    Columns: t_ns, iface, role, kind, handle, parent ("root" for the root qdisc), then the
    cumulative counters backlog_bytes, backlog_pkts, drops, sent_bytes, sent_pkts, overlimits,
    requeues.  A line whose JSON does not parse is skipped.
    """
    rows = []
    for line in text.splitlines():
        m = _QDISC_LINE_RE.match(line.strip())
        if not m:
            continue
        try:
            qdiscs = json.loads(m.group(4))
        except json.JSONDecodeError:
            continue
        if not isinstance(qdiscs, list):
            continue
        for q in qdiscs:
            if not isinstance(q, dict):
                continue
            row = {"t_ns": int(m.group(1)), "iface": m.group(2), "role": m.group(3),
                   "kind": q.get("kind"), "handle": q.get("handle"),
                   "parent": "root" if q.get("root") else q.get("parent")}
            for src, dst in _QDISC_COUNTERS.items():
                row[dst] = _num(q.get(src))
            rows.append(row)
    cols = ["t_ns", "iface", "role", "kind", "handle", "parent", *_QDISC_COUNTERS.values()]
    df = pd.DataFrame(rows, columns=cols)
    df[list(_QDISC_COUNTERS.values())] = df[list(_QDISC_COUNTERS.values())].astype("float64")
    return df


# --------------------------------------------------------------------------------------------
# bpftrace: tcp:tcp_probe (P lines) and <cc>:state (S lines)

_PROBE_FIELDS = ["snd_cwnd", "ssthresh", "srtt_us", "snd_wnd", "rcv_wnd"]
_X1000 = "_x1000"  # a cc_state field `<x>_x1000` carries x scaled by 1000


def parse_tcp_probe(text: str) -> pd.DataFrame:
    """``P <t_ns> <sport> <dport> <snd_cwnd> <ssthresh> <srtt_us> <snd_wnd> <rcv_wnd>`` lines.

    Columns: t_ns, sport, dport, snd_cwnd, ssthresh, srtt_ms, snd_wnd, rcv_wnd; the "infinite"
    initial ssthresh (0x7fffffff) becomes NaN, as in the ss table.  Other lines
    (S lines, "Attaching 1 probe...") and lines with a wrong field count are ignored.
    """
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 9 or parts[0] != "P":
            continue
        try:
            t_ns, sport, dport, *vals = (int(p) for p in parts[1:])
        except ValueError:
            continue
        row = {"t_ns": t_ns, "sport": sport, "dport": dport}
        row.update(zip(_PROBE_FIELDS, (float(v) for v in vals)))
        row["srtt_ms"] = row.pop("srtt_us") / US_PER_MS
        if row["ssthresh"] >= TCP_INFINITE_SSTHRESH:
            row["ssthresh"] = math.nan  # as ss, which omits ssthresh until it is set
        rows.append(row)
    cols = ["t_ns", "sport", "dport", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd", "rcv_wnd"]
    return pd.DataFrame(rows, columns=cols)


def parse_cc_state(text: str) -> pd.DataFrame:
    """``S <cc> <t_ns> <sport> <dport> <field>=<int> ...`` lines -> long format.

    Columns: t_ns, cc, sport, dport, key, value (float).  ``<x>_x1000=<n>`` becomes key ``x``
    with value n/1000.  Fields that are not ``name=integer`` are skipped.
    """
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] != "S":
            continue
        try:
            t_ns, sport, dport = int(parts[2]), int(parts[3]), int(parts[4])
        except ValueError:
            continue
        for item in parts[5:]:
            key, sep, value = item.partition("=")
            try:
                number = int(value)
            except ValueError:
                continue
            if not sep or not key:
                continue
            if key.endswith(_X1000) and len(key) > len(_X1000):
                key, val = key[: -len(_X1000)], number / 1000.0
            else:
                val = float(number)
            rows.append({"t_ns": t_ns, "cc": parts[1], "sport": sport, "dport": dport,
                         "key": key, "value": val})
    return pd.DataFrame(rows, columns=["t_ns", "cc", "sport", "dport", "key", "value"])


# --------------------------------------------------------------------------------------------
# iperf3

@dataclass
class Iperf3Result:
    """What could be read from one iperf3 -J client output.  Missing values are None/NaN."""

    local_port: int | None = None
    remote_port: int | None = None
    bytes_sent: float = math.nan
    bytes_received: float = math.nan
    retransmits: float = math.nan
    mean_rtt_ms: float = math.nan
    max_snd_cwnd_bytes: float = math.nan
    sender_seconds: float = math.nan
    error: str | None = None
    complete: bool = False  # the whole document parsed
    # one row per interval: t_rel_s (interval end, relative to the client's start), interval_s,
    # bytes, bits_per_second, retransmits, snd_cwnd_bytes, rtt_ms
    intervals: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["t_rel_s", "interval_s", "bytes", "bits_per_second", "retransmits",
                 "snd_cwnd_bytes", "rtt_ms"]))


def _salvage_json_object(text: str) -> tuple[dict, bool]:
    """Parse a JSON object, keeping every complete top-level member of a truncated one.

    A list-valued member that is cut off keeps its complete elements (iperf3's ``intervals``).
    Returns (object, complete).
    """
    try:
        obj = json.loads(text)
        return (obj, True) if isinstance(obj, dict) else ({}, False)
    except json.JSONDecodeError:
        pass
    dec = json.JSONDecoder()
    ws = re.compile(r"\s*")
    out: dict = {}
    pos = ws.match(text, 0).end()
    if not text.startswith("{", pos):
        return out, False
    pos += 1
    while True:
        pos = ws.match(text, pos).end()
        try:
            key, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out, False
        pos = ws.match(text, pos).end()
        if not text.startswith(":", pos) or not isinstance(key, str):
            return out, False
        pos = ws.match(text, pos + 1).end()
        try:
            out[key], pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            if text.startswith("[", pos):  # keep the complete elements of a cut-off list
                items = []
                pos += 1
                while True:
                    pos = ws.match(text, pos).end()
                    try:
                        item, pos = dec.raw_decode(text, pos)
                    except json.JSONDecodeError:
                        break
                    items.append(item)
                    pos = ws.match(text, pos).end()
                    if text.startswith(",", pos):
                        pos += 1
                out[key] = items
            return out, False
        pos = ws.match(text, pos).end()
        if text.startswith(",", pos):
            pos += 1
        elif text.startswith("}", pos):
            return out, True
        else:
            return out, False


def _get(obj, *path, default=None):
    for p in path:
        if isinstance(obj, dict):
            obj = obj.get(p)
        elif isinstance(obj, list) and isinstance(p, int) and -len(obj) <= p < len(obj):
            obj = obj[p]
        else:
            return default
    return default if obj is None else obj


def parse_iperf3_json(text: str) -> Iperf3Result:
    """iperf3 3.x client ``-J`` output -> Iperf3Result; never raises.

    Totals come from ``end``: bytes_sent/retransmits from ``sum_sent``, bytes_received from
    ``sum_received``, mean RTT and max cwnd from ``streams[0].sender``.  When the client was
    interrupted before it got the server's results (``error`` set and a receiver total of 0)
    bytes_received is NaN rather than a false 0.  When it was interrupted before the test began
    (no ``start.test_start``) there are no interval rows.  Interval rows use the ``sum`` entry for
    bytes/rate/retransmits and ``streams[0]`` for cwnd and RTT (iperf3 reports RTT in us).
    """
    doc, complete = _salvage_json_object(text)
    res = Iperf3Result(complete=complete)
    res.error = _get(doc, "error")
    lp = _get(doc, "start", "connected", 0, "local_port")
    rp = _get(doc, "start", "connected", 0, "remote_port")
    res.local_port = int(lp) if isinstance(lp, (int, float)) else None
    res.remote_port = int(rp) if isinstance(rp, (int, float)) else None

    end = _get(doc, "end", default={})
    res.bytes_sent = _num(_get(end, "sum_sent", "bytes"))
    res.retransmits = _num(_get(end, "sum_sent", "retransmits"))
    res.sender_seconds = _num(_get(end, "sum_sent", "seconds"))
    res.bytes_received = _num(_get(end, "sum_received", "bytes"))
    if res.error and res.bytes_received == 0:
        res.bytes_received = math.nan
    res.mean_rtt_ms = _num(_get(end, "streams", 0, "sender", "mean_rtt")) / US_PER_MS
    res.max_snd_cwnd_bytes = _num(_get(end, "streams", 0, "sender", "max_snd_cwnd"))

    if _get(doc, "start", "test_start") is None:
        # Interrupted before the test began: iperf3 then reports intervals and totals against
        # an unset start time (seconds since boot), so they carry no timing information.
        res.sender_seconds = math.nan
        return res
    rows = []
    for iv in _get(doc, "intervals", default=[]):
        s = _get(iv, "sum", default={})
        st = _get(iv, "streams", 0, default={})
        rows.append({"t_rel_s": _num(_get(s, "end")), "interval_s": _num(_get(s, "seconds")),
                     "bytes": _num(_get(s, "bytes")),
                     "bits_per_second": _num(_get(s, "bits_per_second")),
                     "retransmits": _num(_get(s, "retransmits")),
                     "snd_cwnd_bytes": _num(_get(st, "snd_cwnd")),
                     "rtt_ms": _num(_get(st, "rtt")) / US_PER_MS})
    if rows:
        res.intervals = pd.DataFrame(rows, columns=res.intervals.columns).astype("float64")
    return res


# --------------------------------------------------------------------------------------------
# ping

_PING_RE = re.compile(r"icmp_seq=(\d+)\b.*?\btime[=<]\s*([0-9.]+)\s*ms")


def parse_ping(text: str) -> pd.DataFrame:
    """ping output -> one row per echo reply: seq (int), rtt_ms (float)."""
    rows = [{"seq": int(m.group(1)), "rtt_ms": float(m.group(2))}
            for m in map(_PING_RE.search, text.splitlines()) if m]
    return pd.DataFrame(rows, columns=["seq", "rtt_ms"]).astype({"seq": "int64",
                                                                 "rtt_ms": "float64"})


# /proc/stat columns: user nice system idle iowait irq softirq steal. Idle and I/O wait are the
# CPU waiting; everything else is work (softirq is where the emulated network's packets are moved).
_IDLE_COLUMNS = (3, 4)


def parse_cpu_stat(text: str) -> pd.DataFrame:
    """raw/cpu.jsonl -> one row per CPU ("cpu" = all together) per interval between samples:
    t_ns (interval end), interval_s, busy_frac (non-idle share of the ticks counted in it)."""
    samples = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            samples.append((int(rec["t_ns"]), {k: [int(x) for x in v] for k, v in rec["cpu"].items()}))
        except (ValueError, KeyError, TypeError):
            continue
    rows = []
    for (t_prev, prev), (t_now, now) in zip(samples, samples[1:]):
        for cpu, ticks in now.items():
            before = prev.get(cpu)
            if before is None or len(before) != len(ticks):
                continue
            delta = [b - a for a, b in zip(before, ticks)]
            total = sum(delta)
            if total <= 0:
                continue
            idle = sum(delta[i] for i in _IDLE_COLUMNS if i < len(delta))
            rows.append({"t_ns": t_now, "cpu": cpu, "interval_s": (t_now - t_prev) / NS_PER_S,
                         "busy_frac": 1.0 - idle / total})
    return pd.DataFrame(rows, columns=["t_ns", "cpu", "interval_s", "busy_frac"])


# --------------------------------------------------------------------------------------------
# Run directory -> tables

def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _first_not_none(*values):
    return next(v for v in values if v is not None)


def _finish(name: str, df: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """Add run_id, put columns in contract order and give them their contract dtypes."""
    df = df.copy()
    df["run_id"] = run_id
    df = df.reindex(columns=COLUMNS[name]).reset_index(drop=True)
    df["run_id"] = df["run_id"].astype("string")
    if "flow" in df:
        df["flow"] = df["flow"].astype("int64")
    if "t_s" in df:
        df["t_s"] = df["t_s"].astype("float64")
    return df


def _data_ports(meta_flows: list[dict], iperf: dict[int, Iperf3Result],
                ss_raw: pd.DataFrame | None) -> dict[int, int]:
    """flow -> local port of its data connection (see module docstring)."""
    ports: dict[int, int] = {}
    for f in meta_flows:
        i = int(f["flow"])
        res = iperf.get(i)
        if res is not None and res.local_port is not None:
            ports[i] = res.local_port
        elif ss_raw is not None and not ss_raw.empty:
            cand = ss_raw[(ss_raw["flow"] == i) & (ss_raw["peer_port"] == f["server_port"])]
            acked = cand.groupby("local_port")["bytes_acked"].max().dropna()
            if not acked.empty:
                ports[i] = int(acked.idxmax())
    return ports


def _map_by_ports(df: pd.DataFrame, meta_flows: list[dict], ports: dict[int, int],
                  sport: str, dport: str) -> pd.DataFrame:
    """Keep the rows of the flows' data connections and add a `flow` column."""
    keys = pd.DataFrame([{sport: ports[int(f["flow"])], dport: int(f["server_port"]),
                          "flow": int(f["flow"])} for f in meta_flows if int(f["flow"]) in ports],
                        columns=[sport, dport, "flow"])
    cols = [c for c in df.columns if c != "flow"]
    return df[cols].merge(keys.astype("int64"), on=[sport, dport], how="inner")


def build_tables(meta: dict, raw: dict[str, str | None]) -> dict[str, pd.DataFrame]:
    """meta.json content + raw file texts -> tables.  Pure: no file access.

    ``raw`` maps raw file names ("ss.jsonl", "iperf3-0.json", ...) to their text or None.
    """
    run_id = str(meta["run_id"])
    t0 = int(meta["t0_monotonic_ns"])
    mflows = sorted(meta.get("flows", []), key=lambda f: int(f["flow"]))

    def t_s(t_ns: pd.Series) -> pd.Series:
        return (t_ns.astype("int64") - t0) / NS_PER_S

    iperf = {int(f["flow"]): parse_iperf3_json(raw[f"iperf3-{f['flow']}.json"])
             for f in mflows if raw.get(f"iperf3-{f['flow']}.json") is not None}
    ss_raw = parse_sock_diag(raw["ss.jsonl"]) if raw.get("ss.jsonl") is not None else None
    ports = _data_ports(mflows, iperf, ss_raw)
    tables: dict[str, pd.DataFrame] = {}

    # flows
    rows = []
    for f in mflows:
        i = int(f["flow"])
        r = iperf.get(i, Iperf3Result())
        rows.append({"flow": i, "cc": f.get("cc"), "rtt_ms": f.get("rtt_ms"),
                     "start_s": f.get("start_s"), "launched_s": f.get("launched_s"),
                     "duration_s": f.get("duration_s"), "elapsed_s": r.sender_seconds,
                     "local_port": ports.get(i),
                     "server_port": f.get("server_port"), "sender_ip": f.get("sender_ip"),
                     "bytes_sent": r.bytes_sent, "bytes_received": r.bytes_received,
                     "retransmits": r.retransmits, "mean_rtt_ms": r.mean_rtt_ms,
                     "max_snd_cwnd_bytes": r.max_snd_cwnd_bytes})
    flows = _finish("flows", pd.DataFrame(rows, columns=COLUMNS["flows"][1:]), run_id)
    for c in ("local_port", "server_port", "bytes_sent", "bytes_received", "retransmits",
              "max_snd_cwnd_bytes"):
        flows[c] = pd.to_numeric(flows[c]).astype("Int64")
    for c in ("rtt_ms", "start_s", "launched_s", "duration_s", "elapsed_s", "mean_rtt_ms"):
        flows[c] = pd.to_numeric(flows[c]).astype("float64")
    flows["cc"] = flows["cc"].astype("string")
    flows["sender_ip"] = flows["sender_ip"].astype("string")
    tables["flows"] = flows

    # throughput: interval ends are relative to the client's own start
    parts = []
    for f in mflows:
        i = int(f["flow"])
        if i not in iperf or iperf[i].intervals.empty:
            continue
        launched = _first_not_none(f.get("launched_s"), f.get("start_s"), 0.0)
        iv = iperf[i].intervals.copy()
        iv["flow"] = i
        iv["t_s"] = iv.pop("t_rel_s") + float(launched)
        parts.append(iv)
    if iperf:
        tables["throughput"] = _finish(
            "throughput", pd.concat(parts) if parts else pd.DataFrame(), run_id)

    # ss: keep only each flow's data connection, sampled in that flow's own blocks
    if ss_raw is not None:
        keys = pd.DataFrame([{"flow": int(f["flow"]), "local_port": ports[int(f["flow"])],
                              "peer_port": int(f["server_port"])}
                             for f in mflows if int(f["flow"]) in ports],
                            columns=["flow", "local_port", "peer_port"]).astype("int64")
        ss = ss_raw.dropna(subset=["local_port", "peer_port"]).astype(
            {"local_port": "int64", "peer_port": "int64"}).merge(
            keys, on=["flow", "local_port", "peer_port"], how="inner")
        ss["t_s"] = t_s(ss["t_ns"])
        tables["ss"] = _finish("ss", ss, run_id)

    # bpftrace
    if raw.get("bpftrace.log") is not None:
        text = raw["bpftrace.log"]
        probe = _map_by_ports(parse_tcp_probe(text), mflows, ports, "sport", "dport")
        probe["t_s"] = t_s(probe["t_ns"])
        tables["tcp_probe"] = _finish("tcp_probe", probe, run_id)
        state = parse_cc_state(text)
        if not state.empty:
            state = _map_by_ports(state, mflows, ports, "sport", "dport")
            state["t_s"] = t_s(state["t_ns"])
            state = _finish("cc_state", state, run_id)
            state["cc"] = state["cc"].astype("string")
            state["key"] = state["key"].astype("string")
            tables["cc_state"] = state

    # qdisc
    if raw.get("qdisc.log") is not None:
        q = parse_qdisc_log(raw["qdisc.log"])
        q["t_s"] = t_s(q["t_ns"])
        q = _finish("qdisc", q, run_id)
        for c in ("iface", "role", "kind", "handle", "parent"):
            q[c] = q[c].astype("string")
        tables["qdisc"] = q

    # ping
    parts = []
    for f in mflows:
        text = raw.get(f"ping-{f['flow']}.txt")
        if text is not None:
            p = parse_ping(text)
            p["flow"] = int(f["flow"])
            parts.append(p)
    if parts:
        tables["ping"] = _finish("ping", pd.concat(parts), run_id)

    # cpu
    if raw.get("cpu.jsonl") is not None:
        cpu = parse_cpu_stat(raw["cpu.jsonl"])
        cpu["t_s"] = t_s(cpu["t_ns"])
        cpu = _finish("cpu", cpu, run_id)
        cpu["cpu"] = cpu["cpu"].astype("string")
        tables["cpu"] = cpu
    return {name: tables[name] for name in TABLES if name in tables}


def load_raw(run_dir: str | Path, meta: dict) -> dict[str, str | None]:
    """Read the raw files build_tables needs; absent files map to None."""
    raw_dir = Path(run_dir) / "raw"
    names = ["ss.jsonl", "qdisc.log", "bpftrace.log", "cpu.jsonl"]
    for f in meta.get("flows", []):
        names += [f"iperf3-{f['flow']}.json", f"ping-{f['flow']}.txt"]
    return {n: _read(raw_dir / n) for n in names}


def write_tables(run_dir: str | Path, tables: dict[str, pd.DataFrame]) -> None:
    """Write each table as ``<run_dir>/<name>.parquet`` (pyarrow, no index)."""
    for name, df in tables.items():
        with atomic.replacing(Path(run_dir) / f"{name}.parquet") as tmp:
            df.to_parquet(tmp, engine="pyarrow", index=False)


def ingest_run(run_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Read ``meta.json`` and ``raw/`` of a run directory, write ``<table>.parquet``, return them.

    Tables whose raw input is absent are omitted; ``flows`` is always present.
    """
    run_dir = Path(run_dir)
    meta = json.loads((run_dir / "meta.json").read_text())
    raw = load_raw(run_dir, meta)
    if meta.get("t0_monotonic_ns") is None:
        # The run ended before time zero (failed or interrupted during set-up): no sample has a
        # time to be placed at, so only the flows' identities are kept.
        raw = {name: None for name in raw}
        meta = {**meta, "t0_monotonic_ns": 0}
    tables = build_tables(meta, raw)
    write_tables(run_dir, tables)
    return tables
