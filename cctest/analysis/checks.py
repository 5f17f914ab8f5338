"""Emulation-health checks: did the emulated network do what the scenario asked for?

A run's data only mean something if the emulation was faithful: the path had the configured
delay, the bottleneck was the only place packets were dropped, and the shaper delivered (not
exceeded) the configured rate.  ``evaluate`` turns a run's record (meta.json) and tables into the
checks.json verdict of docs/run-directory.md:

    {"verdict": "pass" | "warn" | "fail",
     "checks": [{"name", "ok", "measured", "expected", "detail"}, ...]}

Checks and what a failure means for the verdict:

    base_rtt                  per flow: the smallest ping RTT within BASE_RTT_TOL of the flow's
                              configured rtt_ms.  Not ok -> fail (the delay is wrong).  The
                              minimum, because the path's delay is its floor: emulation jitter
                              (a busy vCPU) only ever adds to a ping, and is reported apart.
    goodput                   aggregate bytes delivered while at least one flow was active (the
                              senders' bytes_acked from ss over each flow's span; the receiver's
                              iperf3 total when there is no ss table: it also counts the drain of
                              what iperf3 wrote before it stopped), as a fraction of the payload
                              the link can carry (its rate times MSS / wire frame, 1448 / 1514 at
                              MTU 1500: the shaper counts Ethernet, IP and TCP headers).  Below
                              GOODPUT_MIN -> warn only: a congestion controller that under-uses
                              the link is a result, not an emulation fault (and short or
                              loss-limited flows may never fill it).  Above GOODPUT_MAX -> fail:
                              the shaper is not limiting.
    drops_outside_bottleneck  drop-counter growth on every qdisc whose role is neither "bottleneck"
                              nor "loss" (the scenario's random loss and outages) must be 0.  Not
                              ok -> fail (loss happened where the model has none).
    bottleneck_drops          informational: drop-counter growth at the bottleneck.  Always ok.
    modelled_loss_drops       informational: drop-counter growth at the random-loss qdiscs (none
                              without loss_pct or outages).  Always ok.
    cpu_busy                  the CPUs' busy share (/proc/stat, all CPUs together) while flows
                              were active.  Above CPU_BUSY_MAX -> warn: the run was limited by
                              the (emulated) CPU, not only by the link, so timers and packets
                              were late and the figures may not be the link's.  In a VM on the
                              virtual clock these are guest ticks.

A check that cannot be evaluated because its table is missing has ``ok: null`` and makes the
verdict at most "warn".  Drops are counted on root qdiscs only: the kernel adds a child's drops
to its parents' (the AQM chain netem -> tbf -> AQM), so summing both would double-count.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..base import atomic, jsonsafe
from ..base.jsonsafe import json_safe
from ..model.record import Link, RunRecord
from . import derived

BASE_RTT_TOL = 0.10  # |min ping RTT / configured RTT - 1| allowed
GOODPUT_MIN = 0.90   # aggregate goodput / payload capacity below this -> warn
GOODPUT_MAX = 1.10   # ... above this -> fail: more than the link rate got through
# Busy share of CPU time during the flows above which a run counts as CPU-bound. Measured on the
# virtual clock with 6 flows (bench/vm_clock.py): 60 % at 100 Mbit/s with 1 ns per guest
# instruction; 92 % at 50 and 100 % at 100 Mbit/s with 2 ns. At 100 % nothing is left to serve
# timers on time.
CPU_BUSY_MAX = 0.95

# The record's fields the checks read: a run whose other fields the report refuses still has its health judged.
READS = ("link", "flows", "mode", "vm")

PASS, WARN, FAIL = "pass", "warn", "fail"
INFO = "info"  # severity of a check that never affects the verdict


def _check(name: str, ok: bool | None, measured: Any, expected: Any, detail: str) -> dict:
    return {"name": name, "ok": ok, "measured": measured, "expected": expected,
            "detail": detail}


# --------------------------------------------------------------------------------------------
# base RTT

def check_base_rtt(record: RunRecord, ping: pd.DataFrame | None) -> list[tuple[dict, str]]:
    """One check per flow; returns (check, severity-if-not-ok) pairs."""
    out = []
    for f in record.flows or []:
        if f.flow is None or f.rtt_ms is None:
            raise TypeError("a flow recorded without its number or its rtt_ms has no base RTT to check")
        i, want = f.flow, float(f.rtt_ms)
        rtts = (ping.loc[ping["flow"] == i, "rtt_ms"].dropna()
                if ping is not None and not ping.empty else pd.Series(dtype=float))
        if rtts.empty:
            out.append((_check("base_rtt", None, None, want,
                               f"flow {i}: no ping replies recorded"), WARN))
            continue
        got = float(rtts.min())
        err = got / want - 1.0 if want > 0 else math.inf
        ok = abs(err) <= BASE_RTT_TOL + 1e-9  # 22.0 vs 20 ms is within 10 %
        out.append((_check("base_rtt", ok, round(got, 3), want,
                           f"flow {i}: min of {len(rtts)} pings {got:.3f} ms vs configured "
                           f"{want:g} ms ({err:+.1%}, tolerance ±{BASE_RTT_TOL:.0%}); "
                           f"median {rtts.median():.3f} ms"), FAIL))
    return out


# --------------------------------------------------------------------------------------------
# goodput

def check_goodput(record: RunRecord, tables: dict[str, pd.DataFrame]) -> tuple[dict, str]:
    """How full the link was (derived.link_fullness, the report's utilisation too)."""
    if tables.get("flows") is None or tables["flows"].empty:
        return _check("goodput", None, None, GOODPUT_MIN, "no flows table"), WARN
    full = derived.link_fullness(record, tables)
    notes, span, ratio = full["notes"], full["span_s"], full["fraction"]
    if span <= 0 or math.isnan(ratio):
        return _check("goodput", None, None, GOODPUT_MIN,
                      "; ".join(notes + ["no active span or no bytes"])), WARN
    rate = derived.link_rate_mbps_at(record.link or Link(), 0.0)
    capacity_mbps = full["capacity_bytes"] * 8 / span / 1e6
    ok = GOODPUT_MIN <= ratio <= GOODPUT_MAX
    detail = (f"{full['delivered_bytes'] * 8 / span / 1e6:.2f} Mbit/s of payload over {span:.2f} s with >=1 flow "
              f"active vs {capacity_mbps:.2f} Mbit/s the {rate:g} Mbit/s link carries ({ratio:.1%}; ok in "
              f"[{GOODPUT_MIN:.0%}, {GOODPUT_MAX:.0%}]")
    detail += "; below only warns: flows may not be able to fill the link)"
    if notes:
        detail += "; " + "; ".join(notes)
    severity = FAIL if ratio > GOODPUT_MAX else WARN
    return _check("goodput", ok, round(ratio, 4), GOODPUT_MIN, detail), severity


# --------------------------------------------------------------------------------------------
# drops

def drop_growth(qdisc: pd.DataFrame) -> pd.DataFrame:
    """Drop-counter growth per (iface, role, handle) of root qdiscs (all qdiscs of an iface
    when no root was recorded).  Columns: iface, role, kind, handle, drops."""
    cols = ["iface", "role", "kind", "handle", "drops"]
    if qdisc is None or qdisc.empty:
        return pd.DataFrame(columns=cols)
    q = qdisc.sort_values("t_s")
    if "parent" in q:
        has_root = q.groupby("iface")["parent"].transform(lambda p: (p == "root").any())
        q = q[(q["parent"] == "root") | ~has_root.astype(bool)]
    rows = []
    for (iface, role, handle), g in q.groupby(["iface", "role", "handle"], dropna=False):
        rows.append({"iface": iface, "role": role, "kind": g["kind"].iloc[0],
                     "handle": handle, "drops": derived.counter_growth(g["drops"])})
    return pd.DataFrame(rows, columns=cols)


# Roles whose qdiscs drop by design: the bottleneck's queue, and the netem that models the
# scenario's random loss and outages (dumbbell.qdiscs).
MODELLED_DROPS = ("bottleneck", "loss")


def check_drops(qdisc: pd.DataFrame | None) -> list[tuple[dict, str]]:
    if qdisc is None or qdisc.empty:
        return [(_check("drops_outside_bottleneck", None, None, 0, "no qdisc samples"), WARN),
                (_check("bottleneck_drops", True, None, None, "no qdisc samples"), INFO),
                (_check("modelled_loss_drops", True, None, None, "no qdisc samples"), INFO)]
    g = drop_growth(qdisc)
    outside = g[~g["role"].isin(MODELLED_DROPS)]
    modelled_loss = g[g["role"] == "loss"]
    bq = derived.bottleneck_samples(qdisc)

    def describe(rows: pd.DataFrame) -> str:
        return ", ".join(f"{r.iface} {r.kind} {r.handle} ({r.role}): {r.drops:g}"
                         for r in rows.itertuples()) or "none sampled"

    n_out = float(outside["drops"].sum())
    n_bn = derived.bottleneck_drops(qdisc)
    where = (f"{bq['iface'].iloc[0]} {bq['kind'].iloc[0]} {bq['handle'].iloc[0]}" if len(bq)
             else "no bottleneck qdisc sampled")
    return [
        (_check("drops_outside_bottleneck", n_out == 0, n_out, 0,
                f"drop growth on non-bottleneck root qdiscs: {describe(outside)}"), FAIL),
        (_check("bottleneck_drops", True, n_bn, None,
                f"informational; drop growth at the bottleneck: {where}: {n_bn:g}"), INFO),
        (_check("modelled_loss_drops", True, float(modelled_loss["drops"].sum()), None,
                f"informational; drop growth at the random-loss qdiscs: {describe(modelled_loss)}"), INFO),
    ]


# --------------------------------------------------------------------------------------------
# CPU

def check_cpu_busy(record: RunRecord, cpu: pd.DataFrame | None, flows: pd.DataFrame | None,
                   throughput: pd.DataFrame | None) -> tuple[dict, str]:
    if cpu is None or cpu.empty:
        # Runs recorded before CPU sampling existed carry no `vm` key in meta.json (a native run's is
        # null): not a fault of theirs.
        recorded = "vm" in record.model_fields_set
        return _check("cpu_busy", None, None, CPU_BUSY_MAX, "no CPU samples recorded" if recorded else
                      "not recorded: the run predates CPU sampling"), WARN if recorded else INFO
    spans = derived.flow_spans(record.flows or [], flows, throughput)
    if spans.empty:
        return _check("cpu_busy", None, None, CPU_BUSY_MAX, "no active flow span"), WARN
    start, end = float(spans["t_start"].min()), float(spans["t_end"].max())
    total = cpu[cpu["cpu"] == "cpu"]
    # intervals wholly inside the flows' span (each row's interval ends at t_s)
    inside = total[(total["t_s"] - total["interval_s"] >= start - 1e-6) & (total["t_s"] <= end + 1e-6)]
    if inside.empty:
        return _check("cpu_busy", None, None, CPU_BUSY_MAX, "no CPU sample within the flows' span"), WARN
    busy = float((inside["busy_frac"] * inside["interval_s"]).sum() / inside["interval_s"].sum())
    peak = float(inside["busy_frac"].max())
    n_cpus = max(1, int(cpu.loc[cpu["cpu"] != "cpu", "cpu"].nunique()))
    where = "guest" if record.mode == "vm" else "host"
    ok = busy <= CPU_BUSY_MAX
    detail = (f"{where} CPUs ({n_cpus}) busy {busy:.1%} of the time while flows ran (busiest "
              f"{inside['interval_s'].median():.1f} s: {peak:.1%}); above {CPU_BUSY_MAX:.0%} the run is CPU-bound")
    if not ok:
        detail += ": packets and timers waited for the CPU, so the link may not have been the only limit"
    return _check("cpu_busy", ok, round(busy, 4), CPU_BUSY_MAX, detail), WARN


# --------------------------------------------------------------------------------------------

def evaluate(record: RunRecord, tables: dict[str, pd.DataFrame]) -> dict:
    """The run's record + ingested tables -> checks.json content."""
    results = []
    results += check_base_rtt(record, tables.get("ping"))
    results.append(check_goodput(record, tables))
    results += check_drops(tables.get("qdisc"))
    results.append(check_cpu_busy(record, tables.get("cpu"), tables.get("flows"), tables.get("throughput")))

    verdict = PASS
    for chk, severity in results:
        if severity == INFO:
            continue
        if chk["ok"] is None or (chk["ok"] is False and severity == WARN):
            verdict = WARN if verdict == PASS else verdict
        elif chk["ok"] is False:
            verdict = FAIL
    checks = [{k: json_safe(v) if k in ("measured", "expected") else v for k, v in chk.items()}
              for chk, _ in results]
    return {"verdict": verdict, "checks": checks}


def write_checks(run_dir: str | Path, record: RunRecord, tables: dict[str, pd.DataFrame]) -> dict:
    """Evaluate and write ``<run_dir>/checks.json``; returns its content."""
    result = evaluate(record, tables)
    atomic.write_text(Path(run_dir) / "checks.json", jsonsafe.dumps(result, indent=2) + "\n")
    return result
