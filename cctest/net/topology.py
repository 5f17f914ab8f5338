"""Realise the dumbbell with Mininet and apply offloads, sysctls and qdiscs.

Mininet builds the hosts (network namespaces), veth links and Linux-bridge switches; shaping is
ours (cctest.dumbbell), applied with one `tc -b` batch in the root namespace because per-command
setup is ~3x slower under emulation.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field

from .. import dumbbell
from ..plan import RunSpec


class TopologyError(Exception):
    pass


@dataclass
class Dumbbell:
    run: RunSpec
    with_fq: bool
    net: object = None
    hosts: dict = field(default_factory=dict)

    def build(self) -> None:
        # Imported here: Mininet is only needed (and only importable) where runs happen.
        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.nodelib import LinuxBridge

        setLogLevel("error")
        net = Mininet(topo=None, controller=None, switch=LinuxBridge, link=Link, build=False,
                      autoSetMacs=False, waitConnected=False)
        self.net = net
        for flow in self.run.flows:
            self.hosts[flow.sender] = net.addHost(flow.sender, ip=f"{flow.sender_ip}/16")
            self.hosts[flow.receiver] = net.addHost(flow.receiver, ip=f"{flow.receiver_ip}/16")
        switches = {name: net.addSwitch(name, cls=LinuxBridge) for name in (dumbbell.LEFT_SWITCH, dumbbell.RIGHT_SWITCH)}
        nodes = {**self.hosts, **switches}
        for ldef in dumbbell.links(self.run):
            net.addLink(nodes[ldef.node1], nodes[ldef.node2], intfName1=ldef.iface1, intfName2=ldef.iface2)
        net.build()
        net.start()

    def host(self, name: str):
        return self.hosts[name]

    def host_pids(self) -> list[int]:
        return [host.pid for host in self.hosts.values()]

    def configure(self) -> dict:
        """Offloads, sender sysctls and qdiscs. Returns what was set, for meta.json."""
        offloads: dict[str, dict[str, str]] = {}
        root_cmds = []
        for node, iface in dumbbell.all_ifaces(self.run):
            cmd = dumbbell.offload_cmd(iface)
            if node is None:
                root_cmds.append(cmd)
            else:
                self._host_cmd(node, cmd)
            offloads[iface] = {"tso": "off", "gso": "off", "gro": "off"}
        _shell("; ".join(root_cmds))
        for flow in self.run.flows:
            for key, value in dumbbell.SENDER_SYSCTLS.items():
                self._host_cmd(flow.sender, f"sysctl -qw {key}={value}")
        root_batch = []
        for qdisc in dumbbell.qdiscs(self.run, self.with_fq):
            if qdisc.node is None:
                root_batch.extend(qdisc.tc)
            else:
                for line in qdisc.tc:
                    self._host_cmd(qdisc.node, f"tc {line}")
        with tempfile.NamedTemporaryFile("w", suffix=".tc", delete=False) as batch:
            batch.write("\n".join(root_batch) + "\n")
        _shell(f"tc -b {batch.name}")
        return {"offloads": offloads, "sender_sysctls": dict(dumbbell.SENDER_SYSCTLS)}

    def qdisc_snapshot(self) -> dict[str, str]:
        """`tc -s qdisc show` of every interface, for meta.json."""
        snapshot = {}
        for node, iface in dumbbell.all_ifaces(self.run):
            cmd = f"tc -s qdisc show dev {iface}"
            snapshot[iface] = self.hosts[node].cmd(cmd) if node else _shell(cmd)
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


def _shell(cmd: str) -> str:
    result = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if result.returncode != 0:
        raise TopologyError(f"`{cmd}` failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout
