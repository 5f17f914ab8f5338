"""qdisc: every sampled interface's qdisc counters, over rtnetlink in the root namespace ->
raw/qdisc.log -> the qdisc table."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd
try:
    from pyroute2 import IPRoute
except ImportError:  # a report-only install (no `run` extra): reading tables needs no netlink
    IPRoute = None

from ...model import dumbbell
from ...model.aqm import aqm_counters
from .base import SAMPLING, Capture, RunView, StartContext, Undo, num, require_pyroute2
from .sampler import PeriodicSampler, start_threads


class QdiscSampler(PeriodicSampler):
    """Every qdisc's counters in the root namespace, per tick, over rtnetlink in-process.

    Writes the same objects `tc -s -j qdisc show` prints (kind, handle, parent/root, bytes,
    packets, drops, overlimits, requeues, backlog, qlen), one line per sampled interface. A `tc`
    process per tick would cost a large share of a vCPU under emulation and perturb the run.
    """

    def __init__(self, ifaces: dict[str, str], interval_s: float, log: TextIO, lock: threading.Lock) -> None:
        super().__init__("qdisc", interval_s, log, lock)
        self.ifaces = ifaces  # iface -> role
        self.ipr: IPRoute | None = None
        self.names: dict[int, str] = {}

    def setup(self) -> None:
        self.ipr = require_pyroute2(IPRoute)()
        self.names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in self.ipr.get_links()}

    def teardown(self) -> None:
        if self.ipr is not None:
            self.ipr.close()

    def sample(self) -> str:
        assert self.ipr is not None  # setup() made it
        before = time.monotonic_ns()
        messages = self.ipr.get_qdiscs()
        stamp = (before + time.monotonic_ns()) // 2
        by_dev: dict[str, list] = {}
        for msg in messages:
            dev = self.names.get(msg["index"])
            if dev in self.ifaces:
                by_dev.setdefault(dev, []).append(qdisc_as_tc_json(msg, dev))
        return "".join(
            f"@{stamp} iface={dev} role={self.ifaces[dev]} {json.dumps(qdiscs, separators=(',', ':'))}\n"
            for dev, qdiscs in by_dev.items()
        )


TC_H_ROOT = 0xFFFFFFFF


def tc_handle(value: int) -> str:
    """A qdisc/class handle as tc prints it: 0x10000 -> '1:', 0x10001 -> '1:1'."""
    major, minor = value >> 16, value & 0xFFFF
    return f"{major:x}:" + (f"{minor:x}" if minor else "")


def qdisc_as_tc_json(msg: Any, dev: str) -> dict:
    stats = msg.get_attr("TCA_STATS2")
    basic = (stats.get_attr("TCA_STATS_BASIC") if stats else None) or {}
    queue = (stats.get_attr("TCA_STATS_QUEUE") if stats else None) or {}
    entry = {"kind": msg.get_attr("TCA_KIND"), "handle": tc_handle(msg["handle"]), "dev": dev}
    if msg["parent"] == TC_H_ROOT:
        entry["root"] = True
    else:
        entry["parent"] = tc_handle(msg["parent"])
    entry.update(bytes=basic.get("bytes", 0), packets=basic.get("packets", 0), drops=queue.get("drops", 0),
                 overlimits=queue.get("overlimits", 0), requeues=queue.get("requeues", 0),
                 backlog=queue.get("backlog", 0), qlen=queue.get("qlen", 0))
    entry.update(aqm_counters(entry["kind"], _stats_app(stats)))  # an AQM's ECN marks and drops
    return entry


def _stats_app(stats: Any) -> bytes:
    """The raw bytes of a qdisc's own statistics (TCA_STATS_APP): pyroute2 decodes some kinds only."""
    app = stats.nla("TCA_STATS_APP") if stats else None
    if app is None or not getattr(app, "length", 0):
        return b""
    return bytes(app.data[app.offset + 4:app.offset + app.length])  # after the 4-byte attribute header


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
    import pandas as pd

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
                row[dst] = num(q.get(src))
            rows.append(row)
    cols = ["t_ns", "iface", "role", "kind", "handle", "parent", *_QDISC_COUNTERS.values()]
    df = pd.DataFrame(rows, columns=cols)
    df[list(_QDISC_COUNTERS.values())] = df[list(_QDISC_COUNTERS.values())].astype("float64")
    return df


class Qdisc(Capture):
    name = "qdisc"
    raw_files = ("qdisc.log",)
    tables = {"qdisc": ("run_id", "t_s", "iface", "role", "kind", "handle", "parent", "backlog_bytes",
                        "backlog_pkts", "drops", "sent_bytes", "sent_pkts", "overlimits", "requeues",
                        "ecn_marks", "limit_drops")}  # the last two: an AQM's (cctest/model/aqm.py), else NaN
    required_columns = {"qdisc": ("t_s", "iface", "role")}
    number_columns = {"qdisc": ("t_s", "backlog_bytes", "backlog_pkts", "drops", "sent_bytes", "sent_pkts")}
    starts = SAMPLING

    def start(self, ctx: StartContext, undo: Undo) -> None:
        log = open(ctx.raw / "qdisc.log", "w")
        undo.callback(log.close)
        # The root namespace only: a sampler thread per sender namespace costs the flow launcher
        # tens of ms (GIL) under emulation; the senders' fq counters are in meta.json's snapshot.
        ifaces = {iface: role for node, iface, role in dumbbell.sampled_ifaces(ctx.spec) if node is None}
        interval_s = ctx.spec.scenario.capture.qdisc_interval_ms / 1000
        start_threads([QdiscSampler(ifaces, interval_s, log, threading.Lock())], undo, ctx.warnings)

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        text = raw.get("qdisc.log")
        if text is None:
            return {}
        q = parse_qdisc_log(text)
        q["t_s"] = run.t_s(q["t_ns"])
        return {"qdisc": self.finish("qdisc", q, run, strings=("iface", "role", "kind", "handle", "parent"))}
