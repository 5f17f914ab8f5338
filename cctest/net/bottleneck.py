"""The bottleneck as a chain of qdiscs: its queue discipline (AQM), ECN and a rate that may change.

`chain(iface, link)` is the one place that turns a run's link into tc commands (pure; the topology
applies them in its one `tc -b` batch, and deleting the root qdisc undoes the whole chain):

- fifo (the default): one netem with `rate` and a packet `limit` (cctest/dumbbell.py says why
  netem: its virtual link clock loses no capacity to a late timer, and it releases each packet
  from its socket on enqueue as a NIC's transmit completion would).
- an AQM: netem `delay 10us` (it only releases packets from their sockets; without that TCP Small
  Queues would count the AQM's queue as the sender's own and cap it at ~1 ms) -> tbf with the
  link's rate and a 4 ms burst (netem cannot shape for a child: it hands packets on only once they
  are due, so its child would never hold a queue) -> the AQM, sized to the buffer.

The AQMs' parameters are one small pydantic model per AQM (kernel defaults unless set), so a key
the AQM does not have, or a value out of range, is refused before a run starts.

`LinkSchedule` changes the link mid-run (`tc qdisc change` at the given times): the shaper's rate
at each `rate_schedule` step, and each receiver port's loss qdisc to 100 % for an outage and back.
The rate the link had at time t, for metrics and plots, is `derived.link_rate_mbps_at`.
`aqm_counters` reads an AQM's ECN marks and drops from the statistics the kernel reports for it.
"""

from __future__ import annotations

import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, model_validator

from ..scenario import AQMS, ETHERNET_FRAME_BYTES, no_booleans_for_numbers

if TYPE_CHECKING:
    from ..plan import LinkRun
    from ..scenario import Link

SHAPER_BURST_S = 0.004  # tbf's bucket: enough for a late guest timer to catch up (ENVIRONMENT.md)
ORPHAN_DELAY = "10us"  # tc rounds delays down to its 64 ns ticks and then whole us: 1us would be 0,
# and netem releases packets from their sockets only when it has a delay (or jitter, or a rate)
ECN_SYSCTL = "net.ipv4.tcp_ecn"  # 1: request ECN on outgoing connections and accept it on incoming
AQM_HANDLE = "3:"


class AqmParams(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def no_booleans(cls, data: Any) -> Any:
        return no_booleans_for_numbers(cls, data)


class FifoParams(AqmParams):
    pass


class CodelParams(AqmParams):
    target_ms: float = Field(default=5.0, gt=0, le=1000)  # acceptable standing queue delay
    interval_ms: float = Field(default=100.0, gt=0, le=10_000)  # about a worst-case RTT


    @model_validator(mode="after")
    def target_within_interval(self) -> "CodelParams":
        # CoDel drops when the delay stayed above target for a whole interval: a target at or above
        # the interval is a queue that never reacts as CoDel is meant to.
        if self.target_ms >= self.interval_ms:
            raise ValueError(f"target_ms: {self.target_ms:g} ms is not below interval_ms = {self.interval_ms:g} ms")
        return self


class FqCodelParams(CodelParams):
    flows: StrictInt = Field(default=1024, ge=1, le=65536)


class PieParams(AqmParams):
    target_ms: float = Field(default=15.0, gt=0, le=1000)
    tupdate_ms: float = Field(default=15.0, gt=0, le=1000)  # how often the drop probability is updated
    alpha: StrictInt = Field(default=2, ge=0, le=32)  # weights of the delay error and of its trend
    beta: StrictInt = Field(default=20, ge=0, le=32)


class RedParams(AqmParams):
    # Thresholds on the average queue as queueing delay at the link's starting rate (tc takes bytes).
    min_ms: float = Field(default=5.0, gt=0, le=10_000)
    max_ms: float = Field(default=15.0, gt=0, le=10_000)
    probability: float = Field(default=0.1, gt=0, le=1)  # marking/drop probability at max
    adaptive: StrictBool = True  # Adaptive RED: the kernel tunes the probability to keep avg between min and max


PARAMS: dict[str, type[AqmParams]] = {"fifo": FifoParams, "fq_codel": FqCodelParams, "codel": CodelParams,
                                      "pie": PieParams, "red": RedParams}
assert tuple(PARAMS) == AQMS


def aqm_settings(link: "Link") -> AqmParams:
    """The link's AQM parameters, defaults filled in; ValueError('aqm_params.<key>: ...') if wrong."""
    model = PARAMS[link.aqm]
    allowed = ", ".join(model.model_fields) or f"none ({link.aqm} takes no parameters)"
    for key in link.aqm_params:
        if key not in model.model_fields:
            raise ValueError(f"aqm_params.{key}: not a parameter of {link.aqm}; allowed: {allowed}")
    try:
        params = model.model_validate(link.aqm_params)
    except ValidationError as error:
        first = error.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        key = ".".join(map(str, first["loc"]))
        # a model check names its key itself ("target_ms: ...")
        raise ValueError(f"aqm_params.{key}: {message}" if key else f"aqm_params.{message}") from None
    if isinstance(params, RedParams):
        _check_red(params, link.rate_mbps, link.buffer_size_bytes)
    return params


def _check_red(params: RedParams, rate_mbps: float, buffer_bytes: int) -> None:
    low, high = delay_bytes(params.min_ms, rate_mbps), delay_bytes(params.max_ms, rate_mbps)
    if params.min_ms >= params.max_ms:
        raise ValueError(f"aqm_params.min_ms: {params.min_ms:g} ms is not below max_ms = {params.max_ms:g} ms")
    if low < ETHERNET_FRAME_BYTES:
        raise ValueError(f"aqm_params.min_ms: {params.min_ms:g} ms at {rate_mbps:g} Mbit/s is {low} bytes, less "
                         f"than one packet ({ETHERNET_FRAME_BYTES} bytes); raise min_ms")
    if high >= buffer_bytes:
        raise ValueError(f"aqm_params.max_ms: {params.max_ms:g} ms at {rate_mbps:g} Mbit/s is {high} bytes, not "
                         f"below the buffer's {buffer_bytes} bytes; lower max_ms or raise the buffer")


def delay_bytes(delay_ms: float, rate_mbps: float) -> int:
    """Bytes the link serialises in `delay_ms`."""
    return int(rate_mbps * 1e6 / 8 * delay_ms / 1e3)


# -- the chain (pure) ------------------------------------------------------------------------------


def chain(iface: str, link: "LinkRun") -> tuple[str, ...]:
    """The tc batch lines that make `iface` the run's bottleneck, root first."""
    if link.aqm == "fifo":
        return (f"qdisc replace dev {iface} root handle 1: {_netem_shaper(link, link.rate_bps)}",)
    return (
        f"qdisc replace dev {iface} root handle 1: netem delay {ORPHAN_DELAY} limit {link.netem_limit_pkts}",
        f"qdisc replace dev {iface} parent 1:1 handle 2: {_tbf(link, link.rate_bps)}",
        f"qdisc replace dev {iface} parent 2:1 handle {AQM_HANDLE} {aqm_qdisc(link)}",
    )


def rate_change(iface: str, link: "LinkRun", rate_mbps: float) -> str:
    """The tc batch line that sets the running chain's rate to `rate_mbps` (its buffer stays)."""
    rate_bps = int(rate_mbps * 1e6)
    if link.aqm == "fifo":
        return f"qdisc change dev {iface} root handle 1: {_netem_shaper(link, rate_bps)}"
    return f"qdisc change dev {iface} parent 1:1 handle 2: {_tbf(link, rate_bps)}"


def _netem_shaper(link: "LinkRun", rate_bps: int) -> str:
    return f"netem rate {rate_bps}bit limit {link.queue_limit_pkts}"


def shaper_burst_bytes(rate_bps: int) -> int:
    return max(2 * ETHERNET_FRAME_BYTES, int(rate_bps / 8 * SHAPER_BURST_S))


def _tbf(link: "LinkRun", rate_bps: int) -> str:
    # tbf's own limit only sizes the bfifo it starts with; the AQM replaces that child.
    return f"tbf rate {rate_bps}bit burst {shaper_burst_bytes(rate_bps)} limit {link.buffer_bytes}"


def aqm_qdisc(link: "LinkRun") -> str:
    """The AQM's kind and options; its hard limit is the buffer (in frames, or bytes for red)."""
    p: dict[str, Any] = dict(link.aqm_params)
    ecn = "ecn" if link.ecn else "noecn"
    limit = max(1, link.buffer_pkts)
    if link.aqm == "fq_codel":
        return (f"fq_codel limit {limit} flows {p['flows']} target {p['target_ms']:g}ms "
                f"interval {p['interval_ms']:g}ms {ecn}")
    if link.aqm == "codel":
        return f"codel limit {limit} target {p['target_ms']:g}ms interval {p['interval_ms']:g}ms {ecn}"
    if link.aqm == "pie":
        return (f"pie limit {limit} target {p['target_ms']:g}ms tupdate {p['tupdate_ms']:g}ms "
                f"alpha {p['alpha']} beta {p['beta']} {ecn}")
    if link.aqm == "red":
        low, high = delay_bytes(p["min_ms"], link.rate_mbps), delay_bytes(p["max_ms"], link.rate_mbps)
        burst = max(2, (2 * low + high) // (3 * ETHERNET_FRAME_BYTES) + 1)  # tc-red(8)'s suggestion
        flags = " ".join(f for f, on in (("ecn", link.ecn), ("adaptive", p["adaptive"])) if on)
        return (f"red limit {link.buffer_bytes} min {low} max {high} avpkt {ETHERNET_FRAME_BYTES} burst {burst} "
                f"probability {p['probability']:g} bandwidth {link.rate_bps}bit {flags}").rstrip()
    raise ValueError(f"no AQM qdisc for {link.aqm!r}")


# -- the rate over time --------------------------------------------------------------------------


def outage_change(iface: str, link: "LinkRun", loss_pct: float) -> str:
    """The tc batch line that sets a receiver port's loss qdisc to `loss_pct` (100: an outage)."""
    return f"qdisc change dev {iface} root handle 1: netem loss random {loss_pct:g}% limit {link.netem_limit_pkts}"


@dataclass(frozen=True)
class TimedChange:
    """tc batch lines to write `at_s` after time zero; `what` is recorded with the time they went."""

    at_s: float
    lines: tuple[str, ...]
    what: dict


def timed_changes(link: "LinkRun", bottleneck_iface: str, loss_ifaces: list[str]) -> list[TimedChange]:
    """The link's rate steps and outages (start and end) as tc changes, in time order."""
    changes = [TimedChange(at_s, (rate_change(bottleneck_iface, link, rate),), {"rate_mbps": rate})
               for at_s, rate in link.rate_schedule]
    for at_s, duration_s in link.outages:
        start = tuple(outage_change(iface, link, 100) for iface in loss_ifaces)
        end = tuple(outage_change(iface, link, link.loss_pct) for iface in loss_ifaces)
        outage = {"outage_at_s": at_s, "duration_s": duration_s}
        changes.append(TimedChange(at_s, start, {**outage, "edge": "start"}))
        changes.append(TimedChange(at_s + duration_s, end, {**outage, "edge": "end"}))
    return sorted(changes, key=lambda c: c.at_s)


class LinkSchedule:
    """Writes the link's timed changes (rate steps, outages) at their times after time zero.

    Times are this machine's CLOCK_MONOTONIC, the clock time zero is taken on, so in a VM they are
    guest seconds like the flows'. One `tc -b -` process, started before time zero, reads the lines
    of each change: a process start at the change itself would take a second or more under
    emulation.
    """

    def __init__(self, changes: list[TimedChange]):
        self.changes = changes
        self.applied: list[dict] = []  # each change's `what`, its at_s and applied_s
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.proc = subprocess.Popen(["tc", "-b", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, t0_ns: int) -> None:
        self._thread = threading.Thread(target=self._run, args=(t0_ns,), name="link-schedule", daemon=True)
        self._thread.start()

    def _run(self, t0_ns: int) -> None:
        for change in self.changes:
            if self._stop.wait(max(0.0, t0_ns / 1e9 + change.at_s - time.monotonic())):
                return
            try:
                self.proc.stdin.write("".join(line + "\n" for line in change.lines))
                self.proc.stdin.flush()
            except OSError as exc:  # tc exited: a bad line; stop() reads why
                self.error = f"link change at {change.at_s:g} s: {exc}"
                return
            self.applied.append({"at_s": change.at_s, **change.what,
                                 "applied_s": round((time.monotonic_ns() - t0_ns) / 1e9, 4)})

    def stop(self, timeout_s: float = 10.0) -> None:
        """The undo: no further changes; tc ends with its input. (What it changed goes with the
        qdiscs.)"""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        try:
            _, stderr = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, stderr = self.proc.communicate()
        if self.proc.returncode != 0:
            self.error = f"tc -b - exited with {self.proc.returncode}: {stderr.strip()}"

    def rate_steps_applied(self) -> list[dict]:
        """meta.json rate_schedule_applied: [{at_s, rate_mbps, applied_s}]."""
        return [a for a in self.applied if "rate_mbps" in a]

    def outages_applied(self) -> list[dict]:
        """meta.json outages_applied: [{at_s, duration_s, started_s, ended_s}] (ended_s None when
        the run stopped first)."""
        out: dict[float, dict] = {}
        for a in self.applied:
            if "edge" not in a:
                continue
            entry = out.setdefault(a["outage_at_s"], {"at_s": a["outage_at_s"], "duration_s": a["duration_s"],
                                                      "started_s": None, "ended_s": None})
            entry["started_s" if a["edge"] == "start" else "ended_s"] = a["applied_s"]
        return list(out.values())


def describe(link: "LinkRun") -> str:
    """The chain in words, for meta.json."""
    if link.aqm == "fifo":
        return "netem rate, limit = buffer frames + 1"
    return (f"netem delay {ORPHAN_DELAY} (releases packets from their sockets) -> tbf rate, burst "
            f"{shaper_burst_bytes(link.rate_bps)} B -> {link.aqm}, limit = the buffer")


def planned_steps(link: "LinkRun") -> list[dict]:
    return [{"at_s": at_s, "rate_mbps": rate} for at_s, rate in link.rate_schedule]


def planned_outages(link: "LinkRun") -> list[dict]:
    return [{"at_s": at_s, "duration_s": duration_s} for at_s, duration_s in link.outages]


# -- AQM counters ----------------------------------------------------------------------------------

# The kernel's per-kind statistics structs (include/uapi/linux/pkt_sched.h), as field names in
# order; all unsigned 32-bit unless the format says otherwise.
_CODEL = ("maxpacket", "count", "lastcount", "ldelay", "drop_next", "drop_overlimit", "ecn_mark",
          "dropping", "ce_mark")
_FQ_CODEL = ("type", "maxpacket", "drop_overlimit", "ecn_mark", "new_flow_count", "new_flows_len",
             "old_flows_len", "ce_mark", "memory_usage", "drop_overmemory")
_PIE = ("prob", "delay", "avg_dq_rate", "dq_rate_estimating", "packets_in", "dropped", "overlimit",
        "maxq", "ecn_mark")
_RED = ("early", "pdrop", "other", "marked")
# kind -> (struct format, fields, field counting ECN marks, field counting drops at the hard limit)
_XSTATS = {
    "codel": ("<IIIIiIIII", _CODEL, "ecn_mark", "drop_overlimit"),
    "fq_codel": ("<IIIIIIIIII", _FQ_CODEL, "ecn_mark", "drop_overlimit"),
    "pie": ("<QIIIIIIII", _PIE, "ecn_mark", "overlimit"),
    "red": ("<IIII", _RED, "marked", "pdrop"),
}


def aqm_counters(kind: str | None, xstats: bytes) -> dict:
    """An AQM qdisc's statistics (the bytes of TCA_STATS_APP) as `ecn_marks`, `limit_drops` (drops
    because the queue was full; the rest of the qdisc's drops are the AQM's own) and `xstats`, all
    its fields. Empty for other kinds or a struct of another size."""
    if kind not in _XSTATS:
        return {}
    fmt, fields, marks, limit = _XSTATS[kind]
    if len(xstats) < struct.calcsize(fmt):
        return {}
    values = dict(zip(fields, struct.unpack_from(fmt, xstats)))
    if kind == "fq_codel" and values["type"] != 0:  # 0: the qdisc's statistics, not a flow's
        return {}
    return {"ecn_marks": values[marks], "limit_drops": values[limit], "xstats": values}
