"""ss/tcp_info: each flow's sockets as `ss -ti` sees them (the kernel's tcp_info and tcp_bbr_info),
sampled on the sender over sock_diag netlink -> raw/ss.jsonl -> the ss table."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd
# Imported with the module, not in a sampler thread: under software emulation this import alone
# takes ~10 s, which must not eat into the flows' time.
try:
    from pyroute2 import DiagSocket
except ImportError:  # a report-only install (no `run` extra): reading tables needs no netlink
    DiagSocket = None

from .base import SAMPLING, US_PER_MS, Capture, RunView, StartContext, Undo, flow_number, require_pyroute2
from .sampler import PeriodicSampler, enter_netns, start_threads

SS_COLUMNS = ("run_id", "flow", "t_s", "cwnd", "ssthresh", "srtt_ms", "rttvar_ms", "min_rtt_ms", "mss",
              "bytes_acked", "bytes_retrans", "retrans_total", "lost", "delivery_rate_bps", "pacing_rate_bps",
              "bbr_bw_bps", "bbr_mrtt_ms", "bbr_pacing_gain", "bbr_cwnd_gain")
# The numeric columns of the ss table (everything after run_id, flow, t_s); NaN when absent.
SS_METRICS = list(SS_COLUMNS[3:])


class SockDiagSampler(PeriodicSampler):
    """`ss -ti`'s data for one flow's connections, read in-process over sock_diag netlink.

    The thread joins the sender's network namespace once (setns affects only the calling
    thread) and keeps one netlink socket there, so a sample costs a netlink round trip instead
    of a process start, which under software emulation can take longer than the interval.
    Writes one JSON line per socket per sample: the kernel's tcp_info and tcp_bbr_info fields.
    """

    def __init__(self, flow_index: int, host_pid: int, server_port: int, interval_s: float, log: TextIO,
                 lock: threading.Lock) -> None:
        super().__init__(f"sockdiag-{flow_index}", interval_s, log, lock)
        self.flow_index = flow_index
        self.host_pid = host_pid
        self.server_port = server_port
        self.diag: DiagSocket | None = None

    def setup(self) -> None:
        enter_netns(self.host_pid)
        self.diag = require_pyroute2(DiagSocket)()
        self.diag.bind()

    def teardown(self) -> None:
        if self.diag is not None:
            self.diag.close()

    def sample(self) -> str:
        assert self.diag is not None  # setup() made it
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


TCP_INFINITE_SSTHRESH = 0x7FFFFFFF  # include/net/tcp.h: ssthresh before the first loss
_U32_MAX = 0xFFFFFFFF
_BBR_UNIT = 256  # BBR's gain fixed point


def _or_nan(value: Any, invalid: tuple[Any, ...] = ()) -> float:
    return math.nan if value is None or value in invalid else float(value)


def sock_diag_metrics(info: dict | None, bbr: dict | None) -> dict[str, float]:
    """The kernel's tcp_info / tcp_bbr_info (as the sampler recorded them) -> ss columns, in the
    units `ss -ti` prints: RTTs in ms, rates in bit/s, BBR gains as plain factors."""
    out = {name: math.nan for name in SS_METRICS}
    if info:
        out.update(
            cwnd=_or_nan(info.get("tcpi_snd_cwnd")),
            ssthresh=_or_nan(info.get("tcpi_snd_ssthresh"), (TCP_INFINITE_SSTHRESH,)),
            srtt_ms=_or_nan(info.get("tcpi_rtt")) / US_PER_MS,
            rttvar_ms=_or_nan(info.get("tcpi_rttvar")) / US_PER_MS,
            min_rtt_ms=_or_nan(info.get("tcpi_min_rtt"), (0, _U32_MAX)) / US_PER_MS,
            mss=_or_nan(info.get("tcpi_snd_mss")),
            bytes_acked=_or_nan(info.get("tcpi_bytes_acked")),
            bytes_retrans=_or_nan(info.get("tcpi_bytes_retrans")),
            retrans_total=_or_nan(info.get("tcpi_total_retrans")),
            lost=_or_nan(info.get("tcpi_lost")),
            delivery_rate_bps=_or_nan(info.get("tcpi_delivery_rate")) * 8,
            # ~0 means "no pacing rate set" (the kernel's initial sk_pacing_rate)
            pacing_rate_bps=_or_nan(info.get("tcpi_pacing_rate"), (2**64 - 1,)) * 8,
        )
    if bbr:
        bw_bytes = (int(bbr.get("bbr_bw_hi", 0)) << 32) | int(bbr.get("bbr_bw_lo", 0))
        out.update(
            bbr_bw_bps=bw_bytes * 8.0,
            bbr_mrtt_ms=_or_nan(bbr.get("bbr_min_rtt"), (_U32_MAX,)) / US_PER_MS,
            bbr_pacing_gain=_or_nan(bbr.get("bbr_pacing_gain")) / _BBR_UNIT,
            bbr_cwnd_gain=_or_nan(bbr.get("bbr_cwnd_gain")) / _BBR_UNIT,
        )
    return out


def parse_sock_diag(text: str) -> pd.DataFrame:
    """raw/ss.jsonl (one JSON object per socket per sample) -> one row per socket per sample.

    Columns: t_ns, flow, local_ip, local_port, peer_ip, peer_port, then SS_METRICS (NaN where
    the kernel reported nothing, e.g. no BBR block for CUBIC). Both the iperf3 control and data
    connections appear; mapping to the data connection is done by the caller. Unreadable lines
    (a sampler killed mid-write) are skipped.
    """
    import pandas as pd

    rows: list[dict] = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            row = {"t_ns": int(rec["t_ns"]), "flow": int(rec["flow"]), "local_ip": rec.get("src"),
                   "local_port": int(rec["sport"]), "peer_ip": rec.get("dst"), "peer_port": int(rec["dport"])}
        except (ValueError, KeyError, TypeError):
            continue
        row.update(sock_diag_metrics(rec.get("info"), rec.get("bbr")))
        rows.append(row)
    cols = ["t_ns", "flow", "local_ip", "local_port", "peer_ip", "peer_port", *SS_METRICS]
    df = pd.DataFrame(rows, columns=cols)
    df[SS_METRICS] = df[SS_METRICS].astype("float64")
    return df


class SockDiag(Capture):
    name = "ss"
    raw_files = ("ss.jsonl",)
    tables = {"ss": SS_COLUMNS}
    required_columns = {"ss": ("flow", "t_s")}
    number_columns = {"ss": ("flow", "t_s", "cwnd", "srtt_ms", "min_rtt_ms", "mss")}
    starts = SAMPLING

    def start(self, ctx: StartContext, undo: Undo) -> None:
        log = open(ctx.raw / "ss.jsonl", "w")
        undo.callback(log.close)
        lock = threading.Lock()
        interval_s = ctx.spec.scenario.capture.ss_interval_ms / 1000
        start_threads([SockDiagSampler(flow.index, ctx.net.host(flow.sender).pid, flow.server_port,
                                       interval_s, log, lock) for flow in ctx.spec.flows], undo, ctx.warnings)

    def sockets(self, raw: dict[str, str | None], run: RunView) -> pd.DataFrame | None:
        """Every sampled socket (data and control connections), parsed once per run."""
        text = raw.get("ss.jsonl")
        if text is None:
            return None
        if "ss.jsonl" not in run.parsed:
            run.parsed["ss.jsonl"] = parse_sock_diag(text)
        return run.parsed["ss.jsonl"]

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        """Keep only each flow's data connection, sampled in that flow's own blocks."""
        import pandas as pd

        ss_raw = self.sockets(raw, run)
        if ss_raw is None:
            return {}
        keys = pd.DataFrame([{"flow": flow_number(f), "local_port": run.ports[flow_number(f)],
                              "peer_port": f.server_port}
                             for f in run.flows if flow_number(f) in run.ports],
                            columns=["flow", "local_port", "peer_port"]).astype("int64")
        ss = ss_raw.dropna(subset=["local_port", "peer_port"]).astype(
            {"local_port": "int64", "peer_port": "int64"}).merge(
            keys, on=["flow", "local_port", "peer_port"], how="inner")
        ss["t_s"] = run.t_s(ss["t_ns"])
        return {"ss": self.finish("ss", ss, run)}
