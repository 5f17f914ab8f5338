"""The queue disciplines a bottleneck can end in: one class per AQM, the only list of them.

Each class carries everything that differs between AQMs: its parameters (a pydantic model, kernel
defaults unless set, so a key the AQM does not have or a value out of range is refused before a run
starts), its tc options, the kernel module and spec `cctest doctor` probes, and how to read the
statistics the kernel reports for it (`counters`: its ECN marks and its drops at the hard limit).
`AQMS` (the values `link.aqm` accepts), the doctor's probes and the queue-holding qdisc kinds are
derived from `REGISTRY`.

Adding an AQM (cake, say) is one class here plus its tests (tests/unit/test_bottleneck.py, and a
`tests/vm/scenarios.yaml` point for the VM test that runs it): `cctest/model/bottleneck.py` puts any
AQM behind the same shaper, and `experiments.yaml`, the doctor and the qdisc capture read this list.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, StrictBool, StrictInt, ValidationError, model_validator

from ..base.strict import Strict
from .wire import ETHERNET_FRAME_BYTES

# -- parameters ----------------------------------------------------------------------------------


# tc reads times in whole microseconds: a shorter target or interval would reach the kernel as 0.
TC_TIME_RESOLUTION_MS = 0.001


class AqmParams(Strict):
    pass


class CodelParams(AqmParams):
    target_ms: float = Field(default=5.0, ge=TC_TIME_RESOLUTION_MS, le=1000)  # acceptable standing queue delay
    interval_ms: float = Field(default=100.0, ge=TC_TIME_RESOLUTION_MS, le=10_000)  # about a worst-case RTT

    @model_validator(mode="after")
    def target_within_interval(self) -> CodelParams:
        # CoDel drops when the delay stayed above target for a whole interval: a target at or above
        # the interval is a queue that never reacts as CoDel is meant to.
        if self.target_ms >= self.interval_ms:
            raise ValueError(f"target_ms: {self.target_ms:g} ms is not below interval_ms = {self.interval_ms:g} ms")
        return self


class FqCodelParams(CodelParams):
    flows: StrictInt = Field(default=1024, ge=1, le=65536)


class PieParams(AqmParams):
    target_ms: float = Field(default=15.0, ge=TC_TIME_RESOLUTION_MS, le=1000)
    # how often the drop probability is updated
    tupdate_ms: float = Field(default=15.0, ge=TC_TIME_RESOLUTION_MS, le=1000)
    alpha: StrictInt = Field(default=2, ge=0, le=32)  # weights of the delay error and of its trend
    beta: StrictInt = Field(default=20, ge=0, le=32)


class RedParams(AqmParams):
    # Thresholds on the average queue as queueing delay at the link's starting rate (tc takes bytes).
    min_ms: float = Field(default=5.0, gt=0, le=10_000)
    max_ms: float = Field(default=15.0, gt=0, le=10_000)
    probability: float = Field(default=0.1, gt=0, le=1)  # marking/drop probability at max
    adaptive: StrictBool = True  # Adaptive RED: the kernel tunes the probability to keep avg between min and max


# -- statistics ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class XStats:
    """The kernel's statistics struct of one kind (include/uapi/linux/pkt_sched.h): its struct
    format, field names in order, and which fields count ECN marks and drops at the hard limit."""

    fmt: str
    fields: tuple[str, ...]
    marks: str
    limit_drops: str

    def read(self, xstats: bytes) -> dict[str, int] | None:
        if len(xstats) < struct.calcsize(self.fmt):
            return None
        return dict(zip(self.fields, struct.unpack_from(self.fmt, xstats), strict=True))


_CODEL_XSTATS = XStats("<IIIIiIIII", ("maxpacket", "count", "lastcount", "ldelay", "drop_next", "drop_overlimit",
                                      "ecn_mark", "dropping", "ce_mark"), "ecn_mark", "drop_overlimit")


# -- the AQMs ------------------------------------------------------------------------------------


class Aqm:
    """A bottleneck queue discipline; subclasses fill in the class attributes and `options`."""

    kind: ClassVar[str]
    params: ClassVar[type[AqmParams]] = AqmParams
    module: ClassVar[str | None] = None  # the kernel module `cctest doctor` looks for
    probe: ClassVar[str | None] = None  # a `tc qdisc add` spec that creates it
    xstats: ClassVar[XStats | None] = None

    @staticmethod
    def options(p: dict[str, Any], queue: Queue) -> str:
        raise NotImplementedError

    @staticmethod
    def check(params: AqmParams, queue: Queue) -> None:
        """Checks that need the link as well as the parameters."""

    @classmethod
    def counters(cls, app: bytes) -> dict:
        """The qdisc's own statistics (the payload of TCA_STATS_APP, as the kernel sent it) as
        `ecn_marks`, `limit_drops` (drops because the queue was full; the rest of the qdisc's drops
        are the AQM's own) and `xstats`, all its fields. Empty when the kind reports none or the
        payload is not its layout. A kind whose statistics are nested attributes rather than one
        struct (cake's) reads them in its own override; the qdisc capture only hands over the bytes."""
        values = cls.xstats.read(app) if cls.xstats else None
        if cls.xstats is None or values is None:
            return {}
        return {"ecn_marks": values[cls.xstats.marks], "limit_drops": values[cls.xstats.limit_drops],
                "xstats": values}


@dataclass(frozen=True)
class Queue:
    """What an AQM is sized by: the buffer, the link's starting rate, and whether it marks (ECN)."""

    buffer_bytes: int
    rate_mbps: float
    ecn: bool = False

    @property
    def buffer_pkts(self) -> int:
        """Full frames the buffer holds, as a byte-sized FIFO of buffer_bytes would."""
        return self.buffer_bytes // ETHERNET_FRAME_BYTES

    @property
    def limit_pkts(self) -> int:
        """An AQM's packet limit: the buffer in full frames, at least one."""
        return max(1, self.buffer_pkts)

    @property
    def ecn_flag(self) -> str:
        return "ecn" if self.ecn else "noecn"


class Fifo(Aqm):
    """The default: no AQM; the rate shaper's own packet limit is the buffer (bottleneck.py)."""

    kind = "fifo"


class FqCodel(Aqm):
    kind, params, module, probe = "fq_codel", FqCodelParams, "sch_fq_codel", "fq_codel"
    xstats = XStats("<IIIIIIIIII", ("type", "maxpacket", "drop_overlimit", "ecn_mark", "new_flow_count",
                                    "new_flows_len", "old_flows_len", "ce_mark", "memory_usage",
                                    "drop_overmemory"), "ecn_mark", "drop_overlimit")

    @staticmethod
    def options(p: dict[str, Any], queue: Queue) -> str:
        return (f"fq_codel limit {queue.limit_pkts} flows {p['flows']} target {p['target_ms']:g}ms "
                f"interval {p['interval_ms']:g}ms {queue.ecn_flag}")

    @classmethod
    def counters(cls, app: bytes) -> dict:
        found = super().counters(app)
        # the struct is a union: type 0 holds the qdisc's statistics, 1 a flow's
        return found if found and found["xstats"]["type"] == 0 else {}


class Codel(Aqm):
    kind, params, module, probe, xstats = "codel", CodelParams, "sch_codel", "codel", _CODEL_XSTATS

    @staticmethod
    def options(p: dict[str, Any], queue: Queue) -> str:
        return (f"codel limit {queue.limit_pkts} target {p['target_ms']:g}ms "
                f"interval {p['interval_ms']:g}ms {queue.ecn_flag}")


class Pie(Aqm):
    kind, params, module, probe = "pie", PieParams, "sch_pie", "pie"
    xstats = XStats("<QIIIIIIII", ("prob", "delay", "avg_dq_rate", "dq_rate_estimating", "packets_in", "dropped",
                                   "overlimit", "maxq", "ecn_mark"), "ecn_mark", "overlimit")

    @staticmethod
    def options(p: dict[str, Any], queue: Queue) -> str:
        return (f"pie limit {queue.limit_pkts} target {p['target_ms']:g}ms tupdate {p['tupdate_ms']:g}ms "
                f"alpha {p['alpha']} beta {p['beta']} {queue.ecn_flag}")


class Red(Aqm):
    kind, params, module = "red", RedParams, "sch_red"
    probe = "red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 probability 0.02"
    xstats = XStats("<IIII", ("early", "pdrop", "other", "marked"), "marked", "pdrop")

    @staticmethod
    def options(p: dict[str, Any], queue: Queue) -> str:
        # red's limit is in bytes, its thresholds are the delays at the link's starting rate
        low, high = delay_bytes(p["min_ms"], queue.rate_mbps), delay_bytes(p["max_ms"], queue.rate_mbps)
        burst = max(2, (2 * low + high) // (3 * ETHERNET_FRAME_BYTES) + 1)  # tc-red(8)'s suggestion
        flags = " ".join(f for f, on in (("ecn", queue.ecn), ("adaptive", p["adaptive"])) if on)
        return (f"red limit {queue.buffer_bytes} min {low} max {high} avpkt {ETHERNET_FRAME_BYTES} burst {burst} "
                f"probability {p['probability']:g} bandwidth {int(queue.rate_mbps * 1e6)}bit {flags}").rstrip()

    @staticmethod
    def check(params: AqmParams, queue: Queue) -> None:
        assert isinstance(params, RedParams)
        rate_mbps, buffer_bytes = queue.rate_mbps, queue.buffer_bytes
        low, high = delay_bytes(params.min_ms, rate_mbps), delay_bytes(params.max_ms, rate_mbps)
        if params.min_ms >= params.max_ms:
            raise ValueError(f"aqm_params.min_ms: {params.min_ms:g} ms is not below max_ms = {params.max_ms:g} ms")
        if low < ETHERNET_FRAME_BYTES:
            raise ValueError(f"aqm_params.min_ms: {params.min_ms:g} ms at {rate_mbps:g} Mbit/s is {low} bytes, less "
                             f"than one packet ({ETHERNET_FRAME_BYTES} bytes); raise min_ms")
        if high >= buffer_bytes:
            raise ValueError(f"aqm_params.max_ms: {params.max_ms:g} ms at {rate_mbps:g} Mbit/s is {high} bytes, not "
                             f"below the buffer's {buffer_bytes} bytes; lower max_ms or raise the buffer")


REGISTRY: dict[str, type[Aqm]] = {a.kind: a for a in (Fifo, FqCodel, Codel, Pie, Red)}
AQMS = tuple(REGISTRY)  # the values link.aqm accepts, fifo (the default) first
AqmKind = Literal["fifo", "fq_codel", "codel", "pie", "red"]  # AQMS spelled out for the type checker
# The shaper every AQM sits behind (bottleneck.py), probed by the doctor with the AQMs.
SHAPER_MODULE, SHAPER_PROBE = "sch_tbf", "tbf rate 10mbit burst 5kb latency 50ms"


def delay_bytes(delay_ms: float, rate_mbps: float) -> int:
    """Bytes the link serialises in `delay_ms`."""
    return int(rate_mbps * 1e6 / 8 * delay_ms / 1e3)


def aqm_settings(kind: str, given: dict[str, Any], queue: Queue) -> AqmParams:
    """The AQM's parameters, defaults filled in; ValueError('aqm_params.<key>: ...') if wrong."""
    aqm = REGISTRY[kind]
    allowed = ", ".join(aqm.params.model_fields) or f"none ({kind} takes no parameters)"
    for key in given:
        if key not in aqm.params.model_fields:
            raise ValueError(f"aqm_params.{key}: not a parameter of {kind}; allowed: {allowed}")
    try:
        params = aqm.params.model_validate(given)
    except ValidationError as error:
        first = error.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        key = ".".join(map(str, first["loc"]))
        # a model check names its key itself ("target_ms: ...")
        raise ValueError(f"aqm_params.{key}: {message}" if key else f"aqm_params.{message}") from None
    aqm.check(params, queue)
    return params


def aqm_counters(kind: str | None, app: bytes) -> dict:
    """Aqm.counters of the qdisc `kind` (a TCA_KIND), empty for a kind that is not an AQM of REGISTRY."""
    return REGISTRY[kind].counters(app) if kind in REGISTRY else {}
