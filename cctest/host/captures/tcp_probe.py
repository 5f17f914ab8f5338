"""tcp_probe: the kernel's `tcp:tcp_probe` tracepoint per data connection, at most one line per
socket per 10 ms, recorded by the run's tracer (tracer.py): thinned in the kernel by bpftrace
(raw/bpftrace.log's P lines), or at ingest from every event tracefs logged (raw/tracefs.log).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .. import tracefs
from .base import US_PER_MS, RunView, StartContext, map_by_ports
from .sockdiag import TCP_INFINITE_SSTHRESH
from .tracer import Probes, ServerPorts, TracedCapture

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

TCP_PROBE_MIN_GAP_NS = 10_000_000  # at most one tcp_probe line per socket per 10 ms
_PROBE_FIELDS = ["snd_cwnd", "ssthresh", "srtt_us", "snd_wnd", "rcv_wnd"]


def parse_tracefs_probe(text: str, min_gap_ns: int = TCP_PROBE_MIN_GAP_NS) -> pd.DataFrame:
    """tcp_probe events of a tracefs log, thinned as bpftrace does it in the kernel: a socket's
    event is kept when at least `min_gap_ns` after the last kept one of the same source port.
    Same columns as parse_tcp_probe."""
    import numpy as np
    import pandas as pd

    rows = []
    last: dict[int, int] = {}
    for t_ns, f in tracefs.events(text, "tcp_probe"):
        try:
            sport = int(f["src"].rpartition(":")[2])
            dport = int(f["dest"].rpartition(":")[2])
            values = [int(f["snd_cwnd"]), int(f["ssthresh"]), int(f["srtt"]), int(f["snd_wnd"]), int(f["rcv_wnd"])]
        except (KeyError, ValueError):
            continue
        if sport in last and t_ns - last[sport] < min_gap_ns:
            continue
        last[sport] = t_ns
        rows.append((t_ns, sport, dport, *values))
    cols = ["t_ns", "sport", "dport", "snd_cwnd", "ssthresh", "srtt_us", "snd_wnd", "rcv_wnd"]
    df = pd.DataFrame(rows, columns=cols)
    for c in ["snd_cwnd", "ssthresh", "srtt_us", "snd_wnd", "rcv_wnd"]:
        df[c] = df[c].astype("float64")
    df["srtt_ms"] = df.pop("srtt_us") / US_PER_MS
    df.loc[df["ssthresh"] >= TCP_INFINITE_SSTHRESH, "ssthresh"] = np.nan  # as ss: unset until set
    return df[["t_ns", "sport", "dport", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd", "rcv_wnd"]]


def parse_tcp_probe(text: str) -> pd.DataFrame:
    """``P <t_ns> <sport> <dport> <snd_cwnd> <ssthresh> <srtt_us> <snd_wnd> <rcv_wnd>`` lines.

    Columns: t_ns, sport, dport, snd_cwnd, ssthresh, srtt_ms, snd_wnd, rcv_wnd; the "infinite"
    initial ssthresh (0x7fffffff) becomes NaN, as in the ss table.  Other lines
    (S lines, "Attaching 1 probe...") and lines with a wrong field count are ignored.
    """
    import pandas as pd

    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 9 or parts[0] != "P":
            continue
        try:
            t_ns, sport, dport, *vals = (int(p) for p in parts[1:])
        except ValueError:
            continue
        row: dict[str, float] = {"t_ns": t_ns, "sport": sport, "dport": dport}
        row.update(zip(_PROBE_FIELDS, (float(v) for v in vals), strict=True))
        row["srtt_ms"] = row.pop("srtt_us") / US_PER_MS
        if row["ssthresh"] >= TCP_INFINITE_SSTHRESH:
            row["ssthresh"] = math.nan  # as ss, which omits ssthresh until it is set
        rows.append(row)
    cols = ["t_ns", "sport", "dport", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd", "rcv_wnd"]
    return pd.DataFrame(rows, columns=cols)


class TcpProbe(TracedCapture):
    name = "tcp_probe"
    label = "tcp_probe"
    tables = {"tcp_probe": ("run_id", "flow", "t_s", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd",
                            "rcv_wnd")}
    required_columns = {"tcp_probe": ("flow", "t_s")}
    number_columns = {"tcp_probe": ("flow", "t_s", "snd_cwnd", "srtt_ms")}

    def traces(self, spec: Any) -> bool:
        return bool(spec.scenario.capture.tcp_probe)

    def probes(self, ctx: StartContext) -> Probes:
        ports = ServerPorts.of(ctx.spec)
        return Probes(bpftrace=[
            f"tracepoint:tcp:tcp_probe {ports.bpftrace} {{",
            f"  if (nsecs - @last[args->sport] >= {TCP_PROBE_MIN_GAP_NS}) {{",
            "    @last[args->sport] = nsecs;",
            '    printf("P %llu %u %u %u %u %u %u %u\\n", nsecs, args->sport, args->dport, args->snd_cwnd,',
            "           args->ssthresh, args->srtt, args->snd_wnd, args->rcv_wnd);",
            "  }",
            "}",
        ], events=[("tcp", "tcp_probe", ports.tracefs)], at_end=["clear(@last);"])

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        tracefs_log, bpftrace_log = raw.get("tracefs.log"), raw.get("bpftrace.log")
        if tracefs_log is not None:
            probe = parse_tracefs_probe(tracefs_log)
        elif bpftrace_log is not None:
            probe = parse_tcp_probe(bpftrace_log)
        else:
            return {}
        probe = map_by_ports(probe, run, "sport", "dport")
        probe["t_s"] = run.t_s(probe["t_ns"])
        return {"tcp_probe": self.finish("tcp_probe", probe, run)}
