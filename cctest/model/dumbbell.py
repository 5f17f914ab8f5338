"""The dumbbell as data, and the shaping commands that make it behave. Pure: no root needed.

    ccsnd<i> ── ccs1 ══ bottleneck ══ ccs2 ── ccrcv<i>

Where each effect lives (docs/emulation.md: why they must not share a qdisc):
- bottleneck rate + buffer: one netem with `rate` and a packet `limit`, on ccs1's port towards
  ccs2 (data direction); with an AQM, a chain ending in it (cctest/model/bottleneck.py). The only place
  that should ever drop. netem keeps a virtual link clock, so a late timer loses no capacity; the
  limit is the buffer in full frames plus the frame on the wire.
- transmit completion: netem with a rate releases a packet from its socket on enqueue, as a NIC
  does, so TCP Small Queues does not count the bottleneck's queue as the sender's own.
- per-flow propagation delay: netem on ccs1's port towards that flow's sender, i.e. on the ACK
  path. Delaying ACKs instead of data gives the same RTT while keeping netem off the data path,
  so netem never queues or reorders data and the sender's qdisc stays free for fq.
- random loss: netem on ccs2's port towards that flow's receiver (data direction only).
- fq on each sender's interface, for pacing (its timestamps let a late timer catch up, which
  TCP's internal pacing cannot do under a busy emulated CPU).
- TSO/GSO/GRO off on every interface, so a queued "packet" is one MTU.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from . import bottleneck
from .plan import FlowRun, LinkRun, RunSpec

LEFT_SWITCH = "ccs1"
RIGHT_SWITCH = "ccs2"
BOTTLENECK_IFACE = f"{LEFT_SWITCH}-btl"
BOTTLENECK_PEER_IFACE = f"{RIGHT_SWITCH}-btl"
NODE_PREFIX = "cc"  # every node and interface a run creates starts with this (see cleanup)


def sender_iface(flow: FlowRun) -> str:
    return f"{flow.sender}-eth0"


def receiver_iface(flow: FlowRun) -> str:
    return f"{flow.receiver}-eth0"


def left_port(flow: FlowRun) -> str:
    return f"{LEFT_SWITCH}-snd{flow.index}"


def right_port(flow: FlowRun) -> str:
    return f"{RIGHT_SWITCH}-rcv{flow.index}"


@dataclass(frozen=True)
class LinkDef:
    node1: str
    iface1: str
    node2: str
    iface2: str


@dataclass(frozen=True)
class PlannedQdisc:
    """One shaped interface: where it lives (None = root namespace), its role, its tc batch."""

    node: str | None
    iface: str
    role: str
    tc: tuple[str, ...]


def links(run: RunSpec) -> list[LinkDef]:
    defs = [LinkDef(LEFT_SWITCH, BOTTLENECK_IFACE, RIGHT_SWITCH, BOTTLENECK_PEER_IFACE)]
    for flow in run.flows:
        defs.append(LinkDef(flow.sender, sender_iface(flow), LEFT_SWITCH, left_port(flow)))
        defs.append(LinkDef(RIGHT_SWITCH, right_port(flow), flow.receiver, receiver_iface(flow)))
    return defs


def bottleneck_tc(iface: str, link: LinkRun) -> tuple[str, ...]:
    return bottleneck.chain(iface, link)  # fifo: one netem; an AQM: a chain (cctest/model/bottleneck.py)


def delay_tc(iface: str, rtt_ms: float, limit_pkts: int) -> tuple[str, ...]:
    return (f"qdisc replace dev {iface} root handle 1: netem delay {rtt_ms:g}ms limit {limit_pkts}",)


def loss_tc(iface: str, loss_pct: float, limit_pkts: int) -> tuple[str, ...]:
    return (f"qdisc replace dev {iface} root handle 1: netem loss random {loss_pct:g}% limit {limit_pkts}",)


def fq_tc(iface: str) -> tuple[str, ...]:
    return (f"qdisc replace dev {iface} root handle 1: fq",)


def qdiscs(run: RunSpec, with_fq: bool = True) -> list[PlannedQdisc]:
    """Every qdisc the run installs, in the order to install them."""
    plan = [PlannedQdisc(None, BOTTLENECK_IFACE, "bottleneck", bottleneck_tc(BOTTLENECK_IFACE, run.link))]
    for flow in run.flows:
        plan.append(PlannedQdisc(None, left_port(flow), "delay",
                                 delay_tc(left_port(flow), flow.rtt_ms, run.link.netem_limit_pkts)))
        if run.link.loss_pct > 0 or run.link.outages:  # an outage sets this qdisc's loss to 100 %
            plan.append(PlannedQdisc(None, right_port(flow), "loss",
                                     loss_tc(right_port(flow), run.link.loss_pct, run.link.netem_limit_pkts)))
        if with_fq:
            plan.append(PlannedQdisc(flow.sender, sender_iface(flow), "access", fq_tc(sender_iface(flow))))
    return plan


def loss_ifaces(run: RunSpec) -> list[str]:
    """The receivers' switch ports, where random loss and outages drop packets (root namespace)."""
    return [right_port(flow) for flow in run.flows]


def sampled_ifaces(run: RunSpec) -> list[tuple[str | None, str, str]]:
    """(node, iface, role) of every interface whose qdisc counters the run samples."""
    return [(q.node, q.iface, q.role) for q in qdiscs(run)] + [(None, BOTTLENECK_PEER_IFACE, "other")]


def offload_cmd(iface: str) -> str:
    return f"ethtool -K {iface} tso off gso off gro off"


def all_ifaces(run: RunSpec) -> list[tuple[str | None, str]]:
    """(node, iface) for every emulated interface; node None = a switch port in the root namespace."""
    result: list[tuple[str | None, str]] = []
    for link in links(run):
        for node, iface in ((link.node1, link.iface1), (link.node2, link.iface2)):
            result.append((None if node in (LEFT_SWITCH, RIGHT_SWITCH) else node, iface))
    return result


def describe(run: RunSpec, with_fq: bool = True) -> str:
    """Human-readable topology, shaping commands and flow schedule (for --dry-run)."""
    link = run.link
    lines = [
        f"# run {run.scenario.name} {run.label} repetition {run.repetition}",
        f"# bottleneck {link.rate_mbps:g} Mbit/s, base RTT {link.rtt_ms:g} ms, BDP {link.bdp_bytes} B "
        f"(at {link.bdp_rtt_ms:g} ms), buffer {link.buffer_bytes} B = {link.buffer_bdp:g} BDP "
        f"= {link.buffer_pkts} full frames (+1 on the wire), loss {link.loss_pct:g} %, "
        f"delay/loss netem limit {link.netem_limit_pkts} pkts, aqm {link.aqm}{' with ECN' if link.ecn else ''}"
        + "".join(f", outage {at_s:g}-{at_s + d:g} s" for at_s, d in link.outages),
        "## topology (Mininet, LinuxBridge switches, no controller)",
    ]
    for flow in run.flows:
        lines.append(f"host {flow.sender} {flow.sender_ip}/16   host {flow.receiver} {flow.receiver_ip}/16")
    for ldef in links(run):
        lines.append(f"link {ldef.node1}:{ldef.iface1} <-> {ldef.node2}:{ldef.iface2}")
    lines.append("## offloads")
    for node, iface in all_ifaces(run):
        lines.append(f"[{node or 'root'}] {offload_cmd(iface)}")
    lines.append("## sysctls (inside each host's namespace; the root's raised only where lower, restored after)")
    for node, settings in host_sysctls(run):
        lines.append(f"[{node}] {host_sysctl_cmd(settings)}")
    for key, minimum in ROOT_SYSCTL_MINIMUMS.items():
        lines.append(f"[root] sysctl -w {key}={minimum}   # if lower")
    if link.ecn:
        for flow in run.flows:
            for node in (flow.sender, flow.receiver):
                lines.append(f"[{node}] sysctl -w {bottleneck.ECN_SYSCTL}=1   # ECN (restored after the run)")
    lines.append("## qdiscs (tc -b batch lines)")
    for q in qdiscs(run, with_fq):
        for command in q.tc:
            lines.append(f"[{q.node or 'root'}] tc {command}    # {q.role}")
    for change in bottleneck.timed_changes(link, BOTTLENECK_IFACE, loss_ifaces(run)):
        kind = "rate step" if "rate_mbps" in change.what else f"outage {change.what['edge']}"
        for command in change.lines:
            lines.append(f"t={change.at_s:g}s [root] tc {command}    # {kind}")
    lines.append("## flow schedule")
    for flow in run.flows:
        params = " ".join(f"{k}={v}" for k, v in flow.params.items())
        lines.append(
            f"t={flow.start_s:g}s [{flow.sender}] iperf3 -c {flow.receiver_ip} -p {flow.server_port} "
            f"-C {flow.cc} -t {flow.duration_s:g} -i 0.1 -J   # rtt {flow.rtt_ms:g} ms"
            f"{' params ' + params if params else ''}"
        )
    return "\n".join(lines)


def host_sysctls(run: RunSpec) -> list[tuple[str, dict[str, str]]]:
    """(host, its sysctls) for every host: the TCP buffers everywhere, the senders' own besides."""
    return [pair for flow in run.flows
            for pair in ((flow.sender, {**HOST_SYSCTLS, **SENDER_SYSCTLS}), (flow.receiver, HOST_SYSCTLS))]


def host_sysctl_cmd(settings: dict[str, str]) -> str:
    """One sysctl process for all of a host's settings (a process start is slow under emulation)."""
    return "sysctl -qw " + " ".join(shlex.quote(f"{key}={value}") for key, value in settings.items())


# Per-namespace sysctls: the namespaces die with the run, so nothing needs restoring.
SENDER_SYSCTLS = {
    "net.ipv4.tcp_no_metrics_save": "1",  # no cached ssthresh/RTT between flows
}
# TCP's buffer limits in every host's namespace, the same on every machine: a flow's window is
# bounded by the path, not by the 4 MB send buffer of the kernel's default (100 Mbit/s x 200 ms
# with a 5 BDP queue needs 15 MB). These are the values Mininet's start-up wrote into the root
# namespace, which new namespaces copy, for every run before cctest set them itself.
HOST_TCP_BUFFERS = "10240 87380 16777216"
HOST_SYSCTLS = {"net.ipv4.tcp_rmem": HOST_TCP_BUFFERS, "net.ipv4.tcp_wmem": HOST_TCP_BUFFERS}
# Root-namespace minimums a run needs, raised only where lower, journaled and restored when the
# session ends (`cctest clean` after a crash): veth hands every packet to the receiving CPU's
# backlog, which drops beyond this (the kernel's 1000; Mininet raised it to 5000 for every run
# before cctest set it itself).
ROOT_SYSCTL_MINIMUMS = {"net.core.netdev_max_backlog": 5000}
