"""tcp_probe: the kernel's `tcp:tcp_probe` tracepoint per data connection, at most one line per
socket per 10 ms, from a bpftrace process that also records the modules' state (cc_state.py)
-> raw/bpftrace.log's P lines -> the tcp_probe table."""

from __future__ import annotations

import math

import pandas as pd

from ..vmtime import stretch
from .base import TRACING, US_PER_MS, Capture, RunView, StartContext, map_by_ports
from .cc_state import state_fields
from .sampler import ProcessCapture
from .sockdiag import TCP_INFINITE_SSTHRESH

TCP_PROBE_MIN_GAP_NS = 10_000_000  # at most one tcp_probe line per socket per 10 ms
BPFTRACE_ATTACH_TIMEOUT_S = 60.0  # attaching takes 8-20 s under emulation (docs/emulation.md)
_PROBE_FIELDS = ["snd_cwnd", "ssthresh", "srtt_us", "snd_wnd", "rcv_wnd"]


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


def parse_tcp_probe(text: str) -> pd.DataFrame:
    """``P <t_ns> <sport> <dport> <snd_cwnd> <ssthresh> <srtt_us> <snd_wnd> <rcv_wnd>`` lines.

    Columns: t_ns, sport, dport, snd_cwnd, ssthresh, srtt_ms, snd_wnd, rcv_wnd; the "infinite"
    initial ssthresh (0x7fffffff) becomes NaN, as in the ss table.  Other lines
    (S lines, "Attaching 1 probe...") and lines with a wrong field count are ignored.
    """
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 9 or parts[0] != "P":
            continue
        try:
            t_ns, sport, dport, *vals = (int(p) for p in parts[1:])
        except ValueError:
            continue
        row = {"t_ns": t_ns, "sport": sport, "dport": dport}
        row.update(zip(_PROBE_FIELDS, (float(v) for v in vals)))
        row["srtt_ms"] = row.pop("srtt_us") / US_PER_MS
        if row["ssthresh"] >= TCP_INFINITE_SSTHRESH:
            row["ssthresh"] = math.nan  # as ss, which omits ssthresh until it is set
        rows.append(row)
    cols = ["t_ns", "sport", "dport", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd", "rcv_wnd"]
    return pd.DataFrame(rows, columns=cols)


class TcpProbe(Capture):
    name = "tcp_probe"
    raw_files = ("bpftrace.log",)
    other_files = ("capture.bt",)
    tables = {"tcp_probe": ("run_id", "flow", "t_s", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd",
                            "rcv_wnd")}
    starts = TRACING
    warm_up_phase = "warm-up: wait for bpftrace"

    def start(self, ctx: StartContext, undo) -> ProcessCapture | None:
        if not ctx.with_bpftrace:
            return None
        ports = [flow.server_port for flow in ctx.spec.flows]
        state_ccs = {cc: fields for cc in ctx.spec.modules if (fields := state_fields(cc))}
        script = ctx.raw / "capture.bt"
        script.write_text(bpftrace_script(ports, state_ccs))
        tracer = ProcessCapture("bpftrace", ["bpftrace", str(script)], ctx.raw / "bpftrace.log")
        ctx.journal.add_process(tracer.pid, "bpftrace")
        undo.callback(tracer.stop)
        return tracer

    def warm_up(self, ctx: StartContext, tracer: ProcessCapture) -> None:
        if not tracer.wait_for("Attaching", stretch(BPFTRACE_ATTACH_TIMEOUT_S)):
            ctx.warnings.append("bpftrace did not attach; no tcp_probe or module state traces")

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        if raw.get("bpftrace.log") is None:
            return {}
        probe = map_by_ports(parse_tcp_probe(raw["bpftrace.log"]), run, "sport", "dport")
        probe["t_s"] = run.t_s(probe["t_ns"])
        return {"tcp_probe": self.finish("tcp_probe", probe, run)}
