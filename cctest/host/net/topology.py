"""Realise the dumbbell with Mininet and apply offloads, sysctls and qdiscs.

Mininet builds the hosts (network namespaces), veth links and Linux-bridge switches; shaping is
ours (cctest.model.dumbbell), applied with one `tc -b` batch in the root namespace because per-command
setup is ~3x slower under emulation.

Consecutive runs with the same hosts and links (a sweep's variants, repetitions) share one
topology (`Topologies`): building and tearing down Mininet costs ~25 s per run under emulation,
more than a short run's flows. Each run still gets fresh qdiscs (deleted and re-added, so its
counters start at zero) with its own link parameters; a failed or interrupted run's topology is
torn down with it.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...base.errors import CctestError
from ...model import dumbbell
from ...model.plan import RunSpec

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mininet.net import Mininet
    from mininet.node import Host


class TopologyError(CctestError):
    pass


@dataclass
class Dumbbell:
    run: RunSpec
    with_fq: bool
    net: Mininet | None = None
    hosts: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)  # what configure_interfaces set, for meta.json

    def build(self) -> None:
        # Imported here: Mininet is only needed (and only importable) where runs happen.
        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.nodelib import LinuxBridge

        setLogLevel("error")
        # Mininet's first instance would run fixLimits: global sysctls (the root's TCP buffers,
        # which new namespaces copy, the backlog, ARP and route tables) written behind the run's
        # back and never restored, and an open-file limit of 16384 that mnexec -c then closes one
        # by one in every node (0.3 s each under UML). cctest sets what a run needs itself.
        Mininet.inited = True
        net = Mininet(topo=None, controller=None, switch=LinuxBridge, link=Link, build=False,
                      autoSetMacs=False, waitConnected=False)
        self.net = net
        for flow in self.run.flows:
            self.hosts[flow.sender] = net.addHost(flow.sender, ip=f"{flow.sender_ip}/16")
            self.hosts[flow.receiver] = net.addHost(flow.receiver, ip=f"{flow.receiver_ip}/16")
        switches = {name: net.addSwitch(name, cls=LinuxBridge)
                    for name in (dumbbell.LEFT_SWITCH, dumbbell.RIGHT_SWITCH)}
        nodes = {**self.hosts, **switches}
        for ldef in dumbbell.links(self.run):
            net.addLink(nodes[ldef.node1], nodes[ldef.node2], intfName1=ldef.iface1, intfName2=ldef.iface2)
        net.build()
        net.start()

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def host_pids(self) -> list[int]:
        return [host.pid for host in self.hosts.values()]

    def fits(self, run: RunSpec, with_fq: bool) -> bool:
        """Whether `run` needs exactly these hosts and links (its shaping may differ)."""
        return with_fq == self.with_fq and dumbbell.links(run) == dumbbell.links(self.run)

    def configure(self) -> dict:
        """Offloads, sender sysctls and qdiscs. Returns what was set, for meta.json."""
        self.settings = self.configure_interfaces()
        self.apply_qdiscs()
        return self.settings

    def reshape(self, run: RunSpec) -> None:
        """Take on `run`'s shaping: delete every root qdisc the last run installed, add run's."""
        self._tc((q.node, [f"qdisc del dev {q.iface} root"]) for q in dumbbell.qdiscs(self.run, self.with_fq))
        self.run = run
        self.apply_qdiscs()

    def configure_interfaces(self) -> dict:
        """Offloads and every host's sysctls (read back from the first sender for meta.json): they
        live as long as the interfaces and namespaces."""
        offloads: dict[str, dict[str, str]] = {}
        root_cmds = []
        for node, iface in dumbbell.all_ifaces(self.run):
            cmd = dumbbell.offload_cmd(iface)
            if node is None:
                root_cmds.append(cmd)
            else:
                self._host_cmd(node, cmd)
            offloads[iface] = {"tso": "off", "gso": "off", "gro": "off"}
        _run(["sh", "-c", "; ".join(root_cmds)])  # our own interface names only; one process
        for node, settings in dumbbell.host_sysctls(self.run):
            self._host_cmd(node, dumbbell.host_sysctl_cmd(settings))
        keys = list(dumbbell.HOST_SYSCTLS)
        shown = self._host_cmd(self.run.flows[0].sender, f"sysctl -n {' '.join(keys)}")
        return {"offloads": offloads, "sender_sysctls": dict(dumbbell.SENDER_SYSCTLS),
                "host_sysctls": dict(zip(keys, (" ".join(line.split()) for line in shown.splitlines()), strict=False))}

    def set_sysctl(self, node: str, key: str, value: str) -> str:
        """Set `key` in `node`'s network namespace; returns the value it had."""
        return self._host_cmd(node, f"sysctl -n {key} && sysctl -qw {key}={value}").strip()

    def apply_qdiscs(self) -> None:
        self._tc((q.node, q.tc) for q in dumbbell.qdiscs(self.run, self.with_fq))

    def _tc(self, batches: Iterable[tuple[str | None, Iterable[str]]]) -> None:
        """(node, tc lines) pairs: the root namespace's lines as one `tc -b` process (a process
        start is slow under emulation), each host's in its own shell, stopping at a failure."""
        root_lines: list[str] = []
        for node, lines in batches:
            if node is None:
                root_lines.extend(lines)
            else:
                self._host_cmd(node, " && ".join(f"tc {line}" for line in lines))
        if root_lines:
            with tempfile.NamedTemporaryFile("w", suffix=".tc") as batch:
                batch.write("\n".join(root_lines) + "\n")
                batch.flush()
                _run(["tc", "-b", batch.name])  # an argument list: TMPDIR may hold spaces or quotes

    def qdisc_snapshot(self) -> dict[str, str]:
        """`tc -s qdisc show` of every interface, for meta.json."""
        snapshot = {}
        for node, iface in dumbbell.all_ifaces(self.run):
            cmd = ["tc", "-s", "qdisc", "show", "dev", iface]
            snapshot[iface] = self.hosts[node].cmd(" ".join(cmd)) if node else _run(cmd)
        return snapshot

    def _host_cmd(self, node: str, cmd: str) -> str:
        host = self.hosts[node]
        out = host.cmd(f"{cmd} 2>&1; echo __rc=$?")
        body, _, rc = out.rpartition("__rc=")
        if rc.strip() != "0":
            raise TopologyError(f"[{node}] `{cmd}` failed: {body.strip()}")
        return body

    def stop(self) -> None:
        if self.net is not None:
            self.net.stop()
            self.net = None


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise TopologyError(f"`{shlex.join(argv)}` failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout


class Topologies:
    """Holds the last run's topology so that the next run with the same hosts and links reuses it."""

    def __init__(self) -> None:
        self.current: Dumbbell | None = None

    def acquire(self, run: RunSpec, with_fq: bool) -> tuple[Dumbbell, bool]:
        """A topology shaped for `run`, and whether it was reused. The caller owns it until release."""
        held, self.current = self.current, None
        if held is not None and held.net is not None and held.fits(run, with_fq):
            try:
                held.reshape(run)
                return held, True
            except TopologyError:
                pass  # build afresh below rather than fail the run
        if held is not None:
            held.stop()
        return Dumbbell(run, with_fq), False

    def release(self, net: Dumbbell, keep: bool) -> None:
        """After a run: keep a healthy topology for the next run, else tear it down."""
        if keep and net.net is not None:
            self.current = net
        else:
            net.stop()

    def close(self) -> None:
        held, self.current = self.current, None
        if held is not None:
            held.stop()
