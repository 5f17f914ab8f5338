"""iperf3 servers and clients inside the Mininet hosts (their output: host/captures/iperf3.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ...base.errors import CctestError
from ...model.plan import FlowRun
from ..captures.iperf3 import client_file, server_file
from ..vmtime import stretch

if TYPE_CHECKING:
    from mininet.node import Host


class TrafficError(CctestError):
    pass


def start_server(host: Host, flow: FlowRun, raw_dir: Path) -> subprocess.Popen:
    log = open(raw_dir / server_file(flow.index), "w")
    # -1: serve exactly one test, then exit (no stray servers).
    return host.popen(["iperf3", "-s", "-1", "-p", str(flow.server_port)], stdout=log, stderr=subprocess.STDOUT)


def wait_listening(host: Host, port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + stretch(timeout_s)
    while time.monotonic() < deadline:
        if f":{port}" in host.cmd(f"ss -ltnH 'sport = :{port}'"):
            return
        time.sleep(0.2)
    raise TrafficError(f"iperf3 server on {host.name}:{port} did not start listening within {timeout_s:g} s")


def client_command(flow: FlowRun) -> list[str]:
    return [
        "iperf3", "-c", flow.receiver_ip, "-p", str(flow.server_port),
        "-C", flow.cc, "-t", f"{flow.duration_s:g}", "-i", "0.1", "-J",
        "--connect-timeout", "5000",
    ]


def prepare_client(host: Host, flow: FlowRun, raw_dir: Path) -> subprocess.Popen:
    """Spawn the client ahead of time, parked on a read of stdin; trigger() execs iperf3.

    Spawning a process in a loaded (emulated) guest can take seconds, but a pipe write and an
    exec take milliseconds, so start offsets hold to well within 100 ms.
    """
    out = open(raw_dir / client_file(flow.index), "w")
    parked = ["sh", "-c", 'read _go && exec "$@"', "iperf3-parked", *client_command(flow)]
    return host.popen(parked, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.DEVNULL)


def trigger(client: subprocess.Popen) -> None:
    assert client.stdin is not None  # prepare_client gave it a pipe
    client.stdin.write(b"go\n")
    client.stdin.close()
