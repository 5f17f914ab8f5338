"""Long-lived samplers that write the raw captures of a run (formats: docs/run-directory.md).

All timestamps are CLOCK_MONOTONIC nanoseconds, the clock bpftrace's `nsecs` also uses, so every
trace shares one time base without any clock conversion.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

# Imported with the module, not in a sampler thread: under software emulation this import alone
# takes ~10 s, which must not eat into the flows' time.
from pyroute2 import DiagSocket, IPRoute

from ..vmtime import stretch
from .bottleneck import aqm_counters

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
TCP_PROBE_MIN_GAP_NS = 10_000_000  # at most one tcp_probe line per socket per 10 ms


class PeriodicSampler(threading.Thread):
    """Calls sample() every interval until stopped; sample() returns text to append to the log."""

    def __init__(self, name: str, interval_s: float, log, lock: threading.Lock):
        super().__init__(name=name, daemon=True)
        self.interval_s = interval_s
        self.log = log
        self.lock = lock
        self._stop_event = threading.Event()
        self.samples = 0
        self.failures = 0
        self.error: str | None = None

    def setup(self) -> None:
        """Runs on the sampler's own thread before the first sample."""

    def teardown(self) -> None:
        """Runs on the sampler's own thread after the last sample."""

    def sample(self) -> str:
        raise NotImplementedError

    def run(self) -> None:
        try:
            self.setup()
            self._loop()
        except Exception as exc:  # noqa: BLE001 - a dead sampler must say why, in meta.json
            self.error = f"{self.name}: {type(exc).__name__}: {exc}"
        finally:
            self.teardown()

    def _loop(self) -> None:
        next_tick = time.monotonic()
        while not self._stop_event.is_set():
            try:
                text = self.sample()
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                text = ""
                self.failures += 1
                self.error = f"{self.name}: {type(exc).__name__}: {exc}"
            if text:
                with self.lock:
                    self.log.write(text)
                self.samples += 1
            next_tick += self.interval_s
            # Never try to catch up a backlog: a late sample is better than a burst of them.
            next_tick = max(next_tick, time.monotonic())
            self._stop_event.wait(max(0.0, next_tick - time.monotonic()))

    def stop(self) -> None:
        self._stop_event.set()


class SockDiagSampler(PeriodicSampler):
    """`ss -ti`'s data for one flow's connections, read in-process over sock_diag netlink.

    The thread joins the sender's network namespace once (setns affects only the calling
    thread) and keeps one netlink socket there, so a sample costs a netlink round trip instead
    of a process start, which under software emulation can take longer than the interval.
    Writes one JSON line per socket per sample: the kernel's tcp_info and tcp_bbr_info fields.
    """

    def __init__(self, flow_index: int, host_pid: int, server_port: int, interval_s: float, log, lock):
        super().__init__(f"sockdiag-{flow_index}", interval_s, log, lock)
        self.flow_index = flow_index
        self.host_pid = host_pid
        self.server_port = server_port
        self.diag = None

    def setup(self) -> None:
        enter_netns(self.host_pid)
        self.diag = DiagSocket()
        self.diag.bind()

    def teardown(self) -> None:
        if self.diag is not None:
            self.diag.close()

    def sample(self) -> str:
        before = time.monotonic_ns()
        sockets = self.diag.get_sock_stats(family=socket.AF_INET, states=1 << TCP_ESTABLISHED,
                                           extensions=DIAG_EXTENSIONS)
        stamp = (before + time.monotonic_ns()) // 2
        lines = []
        for sock in sockets:
            if sock["idiag_dport"] != self.server_port:
                continue
            info = sock.get_attr("INET_DIAG_INFO")
            bbr = sock.get_attr("INET_DIAG_BBRINFO")
            lines.append(json.dumps({
                "t_ns": stamp, "flow": self.flow_index,
                "src": sock["idiag_src"], "sport": sock["idiag_sport"],
                "dst": sock["idiag_dst"], "dport": sock["idiag_dport"],
                "cc": sock.get_attr("INET_DIAG_CONG"),
                "info": {field: info[field] for field in TCP_INFO_FIELDS} if info else None,
                "bbr": {field: bbr[field] for field in BBR_INFO_FIELDS} if bbr else None,
            }, separators=(",", ":")))
        return "".join(line + "\n" for line in lines)


class CpuSampler(PeriodicSampler):
    """The CPU time counters of /proc/stat (all CPUs together, then each), in the kernel's ticks.

    Busy time over an interval is what was not idle or waiting on I/O. Inside a VM on the virtual
    clock these are guest ticks, so a saturated emulated CPU shows as busy ~100 % of guest time:
    the run was limited by the CPU rather than the link (checks.py `cpu_busy`).
    """

    def __init__(self, interval_s: float, log, lock, stat_path: str = "/proc/stat"):
        super().__init__("cpu", interval_s, log, lock)
        self.stat_path = stat_path

    def sample(self) -> str:
        with open(self.stat_path) as f:
            text = f.read()
        stamp = time.monotonic_ns()
        counters = {}
        for line in text.splitlines():
            name, *values = line.split()
            if name.startswith("cpu"):
                counters[name] = [int(v) for v in values[:8]]
        return json.dumps({"t_ns": stamp, "cpu": counters}, separators=(",", ":")) + "\n"


TCP_ESTABLISHED = 1
# INET_DIAG_INFO, VEGASINFO (the bit ss sets to ask for BBRINFO too), CONG; as bits (1 << (ext - 1)).
DIAG_EXTENSIONS = (1 << 1) | (1 << 2) | (1 << 3)
TCP_INFO_FIELDS = (
    "tcpi_ca_state", "tcpi_snd_cwnd", "tcpi_snd_ssthresh", "tcpi_rtt", "tcpi_rttvar", "tcpi_min_rtt",
    "tcpi_snd_mss", "tcpi_unacked", "tcpi_lost", "tcpi_retrans", "tcpi_total_retrans", "tcpi_bytes_acked",
    "tcpi_bytes_sent", "tcpi_bytes_retrans", "tcpi_delivered", "tcpi_delivery_rate",
    "tcpi_delivery_rate_app_limited", "tcpi_pacing_rate", "tcpi_notsent_bytes", "tcpi_snd_wnd",
)
BBR_INFO_FIELDS = ("bbr_bw_lo", "bbr_bw_hi", "bbr_min_rtt", "bbr_pacing_gain", "bbr_cwnd_gain")
CLONE_NEWNET = 0x40000000


def enter_netns(pid: int) -> None:
    """Move the calling thread into the network namespace of process `pid`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into the network namespace of pid {pid}")
    finally:
        os.close(fd)


class QdiscSampler(PeriodicSampler):
    """Every qdisc's counters in the root namespace, per tick, over rtnetlink in-process.

    Writes the same objects `tc -s -j qdisc show` prints (kind, handle, parent/root, bytes,
    packets, drops, overlimits, requeues, backlog, qlen), one line per sampled interface. A `tc`
    process per tick would cost a large share of a vCPU under emulation and perturb the run.
    """

    def __init__(self, ifaces: dict[str, str], interval_s: float, log, lock):
        super().__init__("qdisc", interval_s, log, lock)
        self.ifaces = ifaces  # iface -> role
        self.ipr = None
        self.names: dict[int, str] = {}

    def setup(self) -> None:
        self.ipr = IPRoute()
        self.names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in self.ipr.get_links()}

    def teardown(self) -> None:
        if self.ipr is not None:
            self.ipr.close()

    def sample(self) -> str:
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


def qdisc_as_tc_json(msg, dev: str) -> dict:
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


def _stats_app(stats) -> bytes:
    """The raw bytes of a qdisc's own statistics (TCA_STATS_APP): pyroute2 decodes some kinds only."""
    app = stats.nla("TCA_STATS_APP") if stats else None
    if app is None or not getattr(app, "length", 0):
        return b""
    return bytes(app.data[app.offset + 4:app.offset + app.length])  # after the 4-byte attribute header


def tracefs() -> Path | None:
    for path in TRACEFS_CANDIDATES:
        if (path / "events").is_dir():
            return path
    mount = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS_CANDIDATES[0])], capture_output=True)
    return TRACEFS_CANDIDATES[0] if mount.returncode == 0 and (TRACEFS_CANDIDATES[0] / "events").is_dir() else None


def state_fields(cc: str) -> list[tuple[str, str]]:
    """(name, C type) of a module's `<cc>:state` tracepoint fields after sport and dport."""
    root = tracefs()
    if root is None:
        return []
    fmt = root / "events" / cc / "state" / "format"
    if not fmt.exists():
        return []
    fields = re.findall(r"field:([^;]+?)\s+(\w+);", fmt.read_text())
    return [(name, ctype) for ctype, name in fields if not name.startswith("common_") and name not in ("sport", "dport")]


def bpftrace_script(ports: list[int], state_ccs: dict[str, list[tuple[str, str]]]) -> str:
    low, high = min(ports), max(ports)
    lines = [
        f"tracepoint:tcp:tcp_probe /args->dport >= {low} && args->dport <= {high}/ {{",
        f"  if (nsecs - @last[args->sport] >= {TCP_PROBE_MIN_GAP_NS}) {{",
        "    @last[args->sport] = nsecs;",
        '    printf("P %llu %u %u %u %u %u %u %u\\n", nsecs, args->sport, args->dport, args->snd_cwnd,',
        "           args->ssthresh, args->srtt, args->snd_wnd, args->rcv_wnd);",
        "  }",
        "}",
    ]
    for cc, fields in state_ccs.items():
        fmt = " ".join(f"{name}=%lld" for name, _ in fields)
        values = "".join(f", (int64)args->{name}" for name, _ in fields)
        lines += [
            f"tracepoint:{cc}:state /args->dport >= {low} && args->dport <= {high}/ {{",
            f'  printf("S {cc} %llu %u %u {fmt}\\n", nsecs, args->sport, args->dport{values});',
            "}",
        ]
    lines.append("END { clear(@last); }")
    return "\n".join(lines) + "\n"


class ProcessCapture:
    """A capture tool run as its own process (bpftrace, tcpdump), stopped with SIGINT."""

    def __init__(self, name: str, cmd: list[str], log_path: Path):
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for(self, marker: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if marker in self.log_path.read_text(errors="replace"):
                return True
            time.sleep(0.2)
        return False

    def stop(self, timeout_s: float = 20.0) -> None:
        timeout_s = stretch(timeout_s)
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            except ProcessLookupError:
                pass
        self._log.close()


def start_bpftrace(raw_dir: Path, ports: list[int], ccs: list[str]) -> ProcessCapture:
    state_ccs = {cc: fields for cc in ccs if (fields := state_fields(cc))}
    script = raw_dir / "capture.bt"
    script.write_text(bpftrace_script(ports, state_ccs))
    return ProcessCapture("bpftrace", ["bpftrace", str(script)], raw_dir / "bpftrace.log")


def start_tcpdump(raw_dir: Path, iface: str) -> ProcessCapture:
    return ProcessCapture(
        f"tcpdump {iface}",
        ["tcpdump", "-n", "-i", iface, "-s", "100", "-U", "-w", str(raw_dir / f"{iface}.pcap")],
        raw_dir / f"tcpdump-{iface}.log",
    )
