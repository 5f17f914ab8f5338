"""The bottleneck as a chain of qdiscs: its queue discipline (AQM), ECN and a rate that may change.

`chain(iface, link)` is the one place that turns a run's link into tc commands (pure; the topology
applies them in its one `tc -b` batch, and deleting the root qdisc undoes the whole chain):

- fifo (the default): one netem with `rate` and a packet `limit` (cctest/model/dumbbell.py says why
  netem: its virtual link clock loses no capacity to a late timer, and it releases each packet
  from its socket on enqueue as a NIC's transmit completion would).
- an AQM (cctest/model/aqm.py): netem `delay 10us` (it only releases packets from their sockets; without
  that TCP Small Queues would count the AQM's queue as the sender's own and cap it at ~1 ms) -> tbf
  with the link's rate and a 4 ms burst (netem cannot shape for a child: it hands packets on only
  once they are due, so its child would never hold a queue) -> the AQM, sized to the buffer.

`timed_changes` lists the link's changes mid-run (rate steps, outages) as tc lines with their
times; `cctest/host/net/schedule.py` writes them while the flows run. The rate the link had at time t,
for metrics and plots, is `derived.link_rate_mbps_at`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .aqm import REGISTRY
from .plan import LinkRun
from .wire import ETHERNET_FRAME_BYTES

SHAPER_BURST_S = 0.004  # tbf's bucket: enough for a late guest timer to catch up without losing capacity
ORPHAN_DELAY = "10us"  # tc rounds delays down to its 64 ns ticks and then whole us: 1us would be 0,
# and netem releases packets from their sockets only when it has a delay (or jitter, or a rate)
ECN_SYSCTL = "net.ipv4.tcp_ecn"  # 1: request ECN on outgoing connections and accept it on incoming
AQM_HANDLE = "3:"


# -- the chain (pure) ------------------------------------------------------------------------------


def chain(iface: str, link: LinkRun) -> tuple[str, ...]:
    """The tc batch lines that make `iface` the run's bottleneck, root first."""
    if link.aqm == "fifo":
        return (f"qdisc replace dev {iface} root handle 1: {_netem_shaper(link, link.rate_bps)}",)
    return (
        f"qdisc replace dev {iface} root handle 1: netem delay {ORPHAN_DELAY} limit {link.netem_limit_pkts}",
        f"qdisc replace dev {iface} parent 1:1 handle 2: {_tbf(link, link.rate_bps)}",
        f"qdisc replace dev {iface} parent 2:1 handle {AQM_HANDLE} {aqm_qdisc(link)}",
    )


def rate_change(iface: str, link: LinkRun, rate_mbps: float) -> str:
    """The tc batch line that sets the running chain's rate to `rate_mbps` (its buffer stays)."""
    rate_bps = int(rate_mbps * 1e6)
    if link.aqm == "fifo":
        return f"qdisc change dev {iface} root handle 1: {_netem_shaper(link, rate_bps)}"
    return f"qdisc change dev {iface} parent 1:1 handle 2: {_tbf(link, rate_bps)}"


def _netem_shaper(link: LinkRun, rate_bps: int) -> str:
    return f"netem rate {rate_bps}bit limit {link.queue_limit_pkts}"


def shaper_burst_bytes(rate_bps: int) -> int:
    return max(2 * ETHERNET_FRAME_BYTES, int(rate_bps / 8 * SHAPER_BURST_S))


def _tbf(link: LinkRun, rate_bps: int) -> str:
    # tbf's own limit only sizes the bfifo it starts with; the AQM replaces that child.
    return f"tbf rate {rate_bps}bit burst {shaper_burst_bytes(rate_bps)} limit {link.buffer_bytes}"


def aqm_qdisc(link: LinkRun) -> str:
    """The AQM's kind and options; its hard limit is the buffer (in frames, or bytes for red)."""
    return REGISTRY[link.aqm].options(dict(link.aqm_params), link.queue)


# -- the rate over time --------------------------------------------------------------------------


def outage_change(iface: str, link: LinkRun, loss_pct: float) -> str:
    """The tc batch line that sets a receiver port's loss qdisc to `loss_pct` (100: an outage)."""
    return f"qdisc change dev {iface} root handle 1: netem loss random {loss_pct:g}% limit {link.netem_limit_pkts}"


@dataclass(frozen=True)
class TimedChange:
    """tc batch lines to write `at_s` after time zero; `what` is recorded with the time they went."""

    at_s: float
    lines: tuple[str, ...]
    what: dict


def timed_changes(link: LinkRun, bottleneck_iface: str, loss_ifaces: list[str]) -> list[TimedChange]:
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


def describe(link: LinkRun) -> str:
    """The chain in words, for meta.json."""
    if link.aqm == "fifo":
        return "netem rate, limit = buffer frames + 1"
    return (f"netem delay {ORPHAN_DELAY} (releases packets from their sockets) -> tbf rate, burst "
            f"{shaper_burst_bytes(link.rate_bps)} B -> {link.aqm}, limit = the buffer")


def planned_steps(link: LinkRun) -> list[dict]:
    return [{"at_s": at_s, "rate_mbps": rate} for at_s, rate in link.rate_schedule]


def planned_outages(link: LinkRun) -> list[dict]:
    return [{"at_s": at_s, "duration_s": duration_s} for at_s, duration_s in link.outages]
