"""pcap: packet headers (first 100 bytes) on the bottleneck and on each sender's switch port,
with tcpdump (scenario `capture.pcap`) -> raw/<iface>.pcap, kept for people: no table."""

from __future__ import annotations

from ...model import dumbbell
from .base import SAMPLING, Capture, StartContext, Undo
from .sampler import ProcessCapture


class Pcap(Capture):
    name = "pcap"
    other_files = ("<iface>.pcap", "tcpdump-<iface>.log")
    starts = SAMPLING

    def start(self, ctx: StartContext, undo: Undo) -> None:
        if not ctx.spec.scenario.capture.pcap:
            return
        ingress = [dumbbell.left_port(flow) for flow in ctx.spec.flows]
        for iface in [dumbbell.BOTTLENECK_IFACE] + ingress:
            dump = ProcessCapture(
                f"tcpdump {iface}",
                ["tcpdump", "-n", "-i", iface, "-s", "100", "-U", "-w", str(ctx.raw / f"{iface}.pcap")],
                ctx.raw / f"tcpdump-{iface}.log",
            )
            ctx.journal.add_process(dump.pid, f"tcpdump {iface}")
            undo.callback(dump.stop)
