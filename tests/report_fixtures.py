"""Synthetic run directories that follow docs/run-directory.md exactly, for report/metrics tests
and bench/report.py.

`make_run(parent, ...)` writes one run dir (meta.json, checks.json, scenario.yaml and the parquet
tables) and returns its path. Values are plausible rather than physical: flows share the link by a
simple rule (BBR-family flows take more in shallow buffers, less in deep ones; shorter RTT takes
less), with AR(1) noise. With `noise=0` and `constant_mbps` the byte counts are exact, so metrics
can be checked by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

MSS = 1448
CC_STATE_KEYS = {
    "bbr_cws": ["usf", "upper_cwnd"],
    "bbr_acw": ["cwnd_gain", "alpha", "beta"],
    "bbr_modest": ["phase", "min_win", "max_win", "proportion"],
    "bbr3": ["mode", "phase", "max_bw_bps", "inflight_hi", "inflight_lo", "bw_lo_bps",
             "pacing_gain", "cwnd_gain"],
}


@dataclass
class FlowSpec:
    cc: str
    rtt_ms: float
    start_s: float = 0.0
    duration_s: float | None = None  # None: until the run's end


@dataclass
class RunSpec:
    scenario: str = "synthetic"
    flows: list[FlowSpec] = field(default_factory=lambda: [FlowSpec("bbr", 10), FlowSpec("cubic", 10)])
    rate_mbps: float = 20.0
    buffer_bdp: float = 1.0
    loss_pct: float = 0.0
    duration_s: float = 30.0
    repetition: int = 0
    matrix: dict | None = None
    seed: int = 1
    interval_s: float = 0.1
    ss_interval_ms: float = 50.0
    qdisc_interval_ms: float = 50.0
    cc_state_hz: float = 20.0
    tcp_probe_hz: float = 0.0  # 0: no tcp_probe.parquet
    qdisc: bool = True
    cc_state: bool = True
    noise: float = 0.15
    constant_mbps: list[float] | None = None  # exact per-flow rates (noise ignored)
    verdict: str = "pass"


def _bbr_like(cc: str) -> bool:
    return cc.startswith("bbr")


def _base_weights(spec: RunSpec) -> np.ndarray:
    w = []
    for f in spec.flows:
        if _bbr_like(f.cc):
            b = 0.8 - 0.1 * min(spec.buffer_bdp, 5.0)  # shallow: BBR dominates
            if f.cc in ("bbr_cws", "bbr_acw", "bbr_modest"):
                b = 0.5 + (b - 0.5) * 0.3  # the variants are fairer
        else:
            b = 0.2 + 0.1 * min(spec.buffer_bdp, 5.0)
        b *= (f.rtt_ms / 10.0) ** 0.4  # longer RTT grabs more (BBR's RTT bias)
        w.append(max(b, 0.05))
    return np.asarray(w)


def make_run(parent: Path | str, spec: RunSpec | None = None, **kw) -> Path:
    spec = spec or RunSpec(**kw)
    rng = np.random.default_rng(spec.seed)
    parent = Path(parent)
    label = "-".join(f"{k}={v}" for k, v in (spec.matrix or {}).items()) or "base"
    run_id = f"20261121-120000-{label}-r{spec.repetition}".replace("/", "_")
    d = parent / spec.scenario / run_id
    d.mkdir(parents=True, exist_ok=True)
    rtt0 = spec.flows[0].rtt_ms
    bdp = spec.rate_mbps * 1e6 / 8 * rtt0 / 1e3
    buf = bdp * spec.buffer_bdp
    n = len(spec.flows)
    iv = spec.interval_s
    nt = int(round(spec.duration_s / iv))
    grid = (np.arange(nt) + 1) * iv  # interval ends
    weights = _base_weights(spec)

    # Per-flow throughput (Mbit/s) per interval.
    rates = np.zeros((n, nt))
    active = np.zeros((n, nt), bool)
    for i, f in enumerate(spec.flows):
        end = f.start_s + (f.duration_s if f.duration_s is not None else spec.duration_s - f.start_s)
        active[i] = (grid - iv >= f.start_s - 1e-9) & (grid <= end + 1e-9)
    if spec.constant_mbps is not None:
        rates = np.asarray(spec.constant_mbps, float)[:, None] * active
    else:
        ar = np.zeros((n, nt))
        e = rng.normal(0, spec.noise, (n, nt))
        for t in range(1, nt):
            ar[:, t] = 0.9 * ar[:, t - 1] + e[:, t]
        util = 0.96 * (1 - 0.02 * spec.loss_pct)
        for t in range(nt):
            a = active[:, t]
            if not a.any():
                continue
            w = weights * np.exp(ar[:, t]) * a
            rates[:, t] = spec.rate_mbps * util * w / w.sum()
    byts = np.round(rates * 1e6 / 8 * iv).astype(np.int64)

    tp_rows, flow_rows = [], []
    retr = np.zeros((n, nt), np.int64)
    for i, f in enumerate(spec.flows):
        lam = (3.0 if _bbr_like(f.cc) else 0.8) / max(spec.buffer_bdp, 0.2) * (1 + spec.loss_pct)
        if spec.constant_mbps is None:
            retr[i] = rng.poisson(lam * iv * 10, nt) * active[i]
        cwnd_b = np.maximum(4 * MSS, rates[i] * 1e6 / 8 * f.rtt_ms / 1e3 * 1.5).astype(np.int64)
        m = active[i]
        tp_rows.append(pd.DataFrame({
            "run_id": run_id, "flow": i, "t_s": grid[m], "interval_s": iv, "bytes": byts[i][m],
            "bits_per_second": byts[i][m] * 8 / iv, "retransmits": retr[i][m],
            "snd_cwnd_bytes": cwnd_b[m], "rtt_ms": f.rtt_ms + rng.uniform(0, 2, m.sum())}))
        sent = int(byts[i].sum())
        flow_rows.append({
            "run_id": run_id, "flow": i, "cc": f.cc, "rtt_ms": float(f.rtt_ms),
            "start_s": float(f.start_s), "duration_s": float(m.sum() * iv),
            "local_port": 40000 + i, "server_port": 5201 + i, "sender_ip": f"10.0.0.{i + 1}",
            "bytes_sent": sent, "bytes_received": int(sent - min(sent * 0.002, buf + bdp)),
            "retransmits": int(retr[i].sum()), "mean_rtt_ms": float(f.rtt_ms + 1),
            "max_snd_cwnd_bytes": int(cwnd_b.max())})
    throughput = pd.concat(tp_rows, ignore_index=True)
    flows = pd.DataFrame(flow_rows)
    flows.insert(flows.columns.get_loc("duration_s"), "launched_s", flows["start_s"] + 0.01)
    for c in ("local_port", "server_port", "bytes_sent", "bytes_received", "retransmits", "max_snd_cwnd_bytes"):
        flows[c] = flows[c].astype("Int64")  # nullable, as cctest.analysis.ingest writes them
    flows["cc"] = flows["cc"].astype("string")

    # Bottleneck queue: sawtooth up to the buffer, deeper when loss-based flows are present.
    tq = np.arange(0, spec.duration_s, spec.qdisc_interval_ms / 1e3)
    phase = (tq % 4.0) / 4.0
    fill = 0.3 + 0.6 * phase if any(not _bbr_like(f.cc) for f in spec.flows) else 0.4 + 0.1 * np.sin(tq)
    backlog = np.clip(buf * fill * (1 + 0.1 * rng.standard_normal(tq.size)), 0, buf)
    if spec.constant_mbps is not None:
        backlog = np.full(tq.size, buf * 0.5)
    pkts_per_sample = spec.rate_mbps * 1e6 / 8 / MSS * spec.qdisc_interval_ms / 1e3
    sent_pkts = np.cumsum(np.full(tq.size, pkts_per_sample)).round()
    drop_inc = rng.poisson(max(0.01, 0.5 / max(spec.buffer_bdp, 0.2)), tq.size)
    if spec.constant_mbps is not None:
        drop_inc = np.zeros(tq.size, int)
    drops = np.cumsum(drop_inc)
    # As cctest's dumbbell: one netem root 1: (rate + buffer) on the bottleneck, netem for delay
    # elsewhere.
    def q(iface, role, kind, handle, parent, backlog, drops, extra_sent=0.0):
        return pd.DataFrame({"run_id": run_id, "t_s": tq, "iface": iface, "role": role, "kind": kind,
                             "handle": handle, "parent": parent, "backlog_bytes": np.round(backlog),
                             "backlog_pkts": np.round(backlog / MSS), "drops": drops,
                             "sent_bytes": (sent_pkts + extra_sent) * MSS, "sent_pkts": sent_pkts + extra_sent,
                             "overlimits": 0, "requeues": 0})
    qdisc = pd.concat([
        q("ccs1-eth1", "bottleneck", "netem", "1:", "root", backlog, drops, 0.0),
        q("ccs2-eth1", "delay", "netem", "1:", "root", np.full(tq.size, bdp), np.zeros(tq.size, int)),
    ], ignore_index=True).sort_values("t_s", kind="stable").reset_index(drop=True)
    for c in ("iface", "role", "kind", "handle", "parent"):
        qdisc[c] = qdisc[c].astype("string")
    qmean_ms = float(np.mean(backlog)) * 8 / (spec.rate_mbps * 1e6) * 1e3

    # ss samples.
    ts = np.arange(0, spec.duration_s, spec.ss_interval_ms / 1e3) + spec.ss_interval_ms / 1e3
    ss_rows, st_rows, tpb_rows = [], [], []
    for i, f in enumerate(spec.flows):
        a = np.interp(ts, grid, active[i].astype(float)) > 0.5
        t = ts[a]
        r = np.interp(t, grid, rates[i])
        q = np.interp(t, tq, backlog) * 8 / (spec.rate_mbps * 1e6) * 1e3
        srtt = f.rtt_ms + q + rng.uniform(0, 0.5, t.size)
        cwnd = np.maximum(4, (r * 1e6 / 8 * srtt / 1e3 / MSS).round())
        bbr = _bbr_like(f.cc)
        ss_rows.append(pd.DataFrame({
            "run_id": run_id, "flow": i, "t_s": t, "cwnd": cwnd, "ssthresh": np.nan,
            "srtt_ms": srtt, "rttvar_ms": rng.uniform(0.1, 2, t.size),
            "min_rtt_ms": f.rtt_ms + 0.05 + np.minimum.accumulate(rng.uniform(0, 1, t.size)),
            "mss": MSS, "bytes_acked": np.cumsum(r * 1e6 / 8 * spec.ss_interval_ms / 1e3),
            "bytes_retrans": np.nan, "retrans_total": np.nan, "lost": 0,
            "delivery_rate_bps": r * 1e6, "pacing_rate_bps": r * 1e6 * 1.25,
            "bbr_bw_bps": r * 1e6 if bbr else np.nan,
            "bbr_mrtt_ms": f.rtt_ms + 0.1 if bbr else np.nan,
            "bbr_pacing_gain": np.where(rng.uniform(size=t.size) < 0.125, 1.25, 1.0) if bbr else np.nan,
            "bbr_cwnd_gain": 2.0 if bbr else np.nan}))
        if spec.cc_state and f.cc in CC_STATE_KEYS:
            tc = np.arange(0, t.size and spec.duration_s, 1 / spec.cc_state_hz)
            tc = tc[(tc >= t.min()) & (tc <= t.max())] if t.size else tc[:0]
            for key in CC_STATE_KEYS[f.cc]:
                st_rows.append(pd.DataFrame({"run_id": run_id, "flow": i, "t_s": tc, "cc": f.cc,
                                             "key": key, "value": _state_values(f.cc, key, tc, rng)}))
        if spec.tcp_probe_hz > 0:
            tpp = np.sort(rng.uniform(t.min(), t.max(), int((t.max() - t.min()) * spec.tcp_probe_hz)))
            tpb_rows.append(pd.DataFrame({
                "run_id": run_id, "flow": i, "t_s": tpp,
                "snd_cwnd": np.interp(tpp, t, cwnd).round(), "ssthresh": 2147483647,
                "srtt_ms": np.interp(tpp, t, srtt), "snd_wnd": 3 << 20, "rcv_wnd": 3 << 20}))
    ss = pd.concat(ss_rows, ignore_index=True)
    ping = pd.DataFrame([{"run_id": run_id, "flow": i, "seq": s,
                          "rtt_ms": f.rtt_ms + 1 + rng.uniform(0, 0.3)}
                         for i, f in enumerate(spec.flows) for s in range(5)])

    throughput.to_parquet(d / "throughput.parquet", index=False)
    flows.to_parquet(d / "flows.parquet", index=False)
    ss.to_parquet(d / "ss.parquet", index=False)
    ping.to_parquet(d / "ping.parquet", index=False)
    if spec.qdisc:
        qdisc.to_parquet(d / "qdisc.parquet", index=False)
    if st_rows:
        pd.concat(st_rows, ignore_index=True).to_parquet(d / "cc_state.parquet", index=False)
    if tpb_rows:
        pd.concat(tpb_rows, ignore_index=True).to_parquet(d / "tcp_probe.parquet", index=False)
    (d / "raw").mkdir(exist_ok=True)

    meta = {
        "run_id": run_id, "scenario": spec.scenario, "repetition": spec.repetition,
        "matrix": spec.matrix or {}, "status": "ok", "error": None,
        "start_time": "2026-11-21T12:00:00+00:00", "end_time": "2026-11-21T12:00:30+00:00",
        "duration_s": spec.duration_s, "t0_monotonic_ns": 123456789,
        "link": {"rate_mbps": spec.rate_mbps, "rtt_ms": rtt0, "bdp_rtt_ms": rtt0, "bdp_bytes": int(bdp),
                 "buffer_bytes": int(buf), "buffer_bdp": spec.buffer_bdp, "loss_pct": spec.loss_pct,
                 "mtu": 1500, "buffer_pkts": int(buf // 1514), "queue_limit_pkts": int(buf // 1514) + 1,
                 "netem_limit_pkts": 10000},
        "flows": [{"flow": i, "cc": f.cc, "rtt_ms": f.rtt_ms, "start_s": f.start_s,
                   "duration_s": f.duration_s or spec.duration_s - f.start_s, "sender": f"h{i + 1}",
                   "receiver": f"r{i + 1}", "sender_ip": f"10.0.0.{i + 1}",
                   "receiver_ip": f"10.0.1.{i + 1}", "server_port": 5201 + i, "params": {}}
                  for i, f in enumerate(spec.flows)],
        "seed": spec.seed, "kernel": {"release": "6.1.0-synthetic", "uname": "Linux synthetic"},
        "mode": "vm", "cctest": {"version": "0.1.0", "git_commit": "0" * 40},
        "tools": {"iperf3": "3.12"}, "sysctls": {}, "qdiscs": {}, "offloads": {}, "modules": [],
        "capture": {"ss_interval_ms": spec.ss_interval_ms, "qdisc_interval_ms": spec.qdisc_interval_ms,
                    "tcp_probe": spec.tcp_probe_hz > 0, "pcap": False},
    }
    (d / "meta.json").write_text(json.dumps(meta, indent=2))
    goodput = float(byts.sum()) * 8 / spec.duration_s / 1e6
    checks = {"verdict": spec.verdict, "checks": [
        {"name": f"base_rtt[{i}]", "ok": True, "measured": f.rtt_ms + 1, "expected": f.rtt_ms,
         "detail": "ping median within 10 % of configured"} for i, f in enumerate(spec.flows)] + [
        {"name": "goodput", "ok": spec.verdict != "fail", "measured": round(goodput, 2),
         "expected": spec.rate_mbps, "detail": "aggregate goodput vs configured rate"},
        {"name": "drops_outside_bottleneck", "ok": True, "measured": 0, "expected": 0, "detail": ""}]}
    (d / "checks.json").write_text(json.dumps(checks, indent=2))
    (d / "scenario.yaml").write_text(f"name: {spec.scenario}\n# synthetic (qmean {qmean_ms:.1f} ms)\n")
    return d


def _state_values(cc: str, key: str, t: np.ndarray, rng) -> np.ndarray:
    if key in ("mode",):
        v = np.full(t.size, 2.0)
        v[t < 1.0] = 0
        v[(t >= 1.0) & (t < 1.3)] = 1
        v[(t % 10) < 0.2] = 3
        return v
    if key == "phase" and cc == "bbr3":
        return np.floor((t * 2) % 4)
    if key == "phase":
        return np.floor((t / 3) % 3)
    if key == "usf":
        return np.clip(1.0 - 0.3 * np.abs(np.sin(t / 7)), 0.2, 1.0)
    if key in ("alpha",):
        return 1 + np.abs(np.sin(t / 3))
    if key == "beta":
        return 0.5 + 0.4 * np.abs(np.cos(t / 5))
    if key in ("cwnd_gain",):
        return np.where(np.sin(t) > 0, 2.0, 2.5)
    if key == "pacing_gain":
        return np.where((t % 3) < 0.3, 1.25, np.where((t % 3) < 0.6, 0.9, 1.0))
    if key in ("proportion",):
        return 0.75 + 0.25 * np.abs(np.sin(t / 4))
    return 100 + 50 * np.abs(np.sin(t / 4)) + rng.uniform(0, 5, t.size)


def make_sweep(parent: Path | str, *, buffers=(0.5, 1, 2, 5), rtts=(10, 40), pairs=(("bbr", "cubic"),),
               reps: int = 2, duration_s: float = 12.0, **kw) -> list[Path]:
    """A buffer x RTT x algorithm-pair sweep with repetitions (one scenario per pair)."""
    out = []
    seed = 100
    for a, b in pairs:
        for rtt in rtts:
            for bb in buffers:
                for r in range(reps):
                    seed += 1
                    out.append(make_run(parent, RunSpec(
                        scenario=f"{a}-vs-{b}", flows=[FlowSpec(a, rtt), FlowSpec(b, rtt)],
                        buffer_bdp=bb, duration_s=duration_s, repetition=r, seed=seed,
                        matrix={"buffer_bdp": bb, "rtt_ms": rtt}, ss_interval_ms=100,
                        qdisc_interval_ms=100, cc_state_hz=5, **kw)))
    return out
