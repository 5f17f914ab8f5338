"""tcp_probe: the kernel's `tcp:tcp_probe` tracepoint per data connection, at most one line per
socket per 10 ms, recorded with the modules' state (cc_state.py) by one of two tracers:

- bpftrace (raw/bpftrace.log's P and S lines): thins in the kernel, so its log stays small; it
  needs BPF with perf events, which the UML engine's kernel lacks, and 8-20 s to attach under QEMU;
- tracefs (raw/tracefs.log, `trace_pipe` of an instance of our own with a port filter on each event
  and the `mono` clock): needs nothing but tracefs; every event is logged and thinned at ingest.

The UML engine always uses tracefs; elsewhere bpftrace where it is installed, else tracefs.
CCTEST_TRACER=tracefs|bpftrace chooses.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from .. import tracefs
from ..tools import which
from ..vmtime import stretch
from .base import TRACING, US_PER_MS, Capture, RunView, StartContext, Undo, map_by_ports
from .cc_state import state_fields
from .sampler import ProcessCapture
from .sockdiag import TCP_INFINITE_SSTHRESH

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

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


TRACERS = ("bpftrace", "tracefs")


def choose_tracer(bpftrace_installed: bool, environ: dict[str, str] | None = None) -> str | None:
    """Which tracer records tcp_probe and module state here, or None when none can."""
    env = os.environ if environ is None else environ
    forced = env.get("CCTEST_TRACER", "")
    if forced and forced not in TRACERS:
        from ...base.errors import BadInput

        raise BadInput(f"CCTEST_TRACER={forced}: allowed values are {', '.join(TRACERS)}")
    if forced:
        return forced
    if env.get("CCTEST_VM_ENGINE") == "uml" or not bpftrace_installed:
        return "tracefs"  # the runner mounts tracefs if it is absent; a kernel without it fails at start
    return "bpftrace"


def tracefs_events(ports: list[int], state_ccs: list[str]) -> list[tuple[str, str, str]]:
    """The events the tracefs recorder enables, each filtered to the flows' server ports."""
    low, high = min(ports), max(ports)
    port_filter = f"dport >= {low} && dport <= {high}"
    return [("tcp", "tcp_probe", port_filter)] + [(cc, "state", port_filter) for cc in state_ccs]


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


class TcpProbe(Capture):
    name = "tcp_probe"
    raw_files = ("bpftrace.log", "tracefs.log")
    other_files = ("capture.bt",)
    tables = {"tcp_probe": ("run_id", "flow", "t_s", "snd_cwnd", "ssthresh", "srtt_ms", "snd_wnd",
                            "rcv_wnd")}
    required_columns = {"tcp_probe": ("flow", "t_s")}
    number_columns = {"tcp_probe": ("flow", "t_s", "snd_cwnd", "srtt_ms")}
    starts = TRACING
    warm_up_phase = "warm-up: wait for the tracer"  # bpftrace attaching; tracefs records at once

    def start(self, ctx: StartContext, undo: Undo) -> ProcessCapture | tracefs.Recorder | None:
        if not ctx.with_bpftrace:  # i.e. no tracer here (session: tcp_probe.choose_tracer)
            return None
        ports = [flow.server_port for flow in ctx.spec.flows]
        state_ccs = {cc: fields for cc in ctx.spec.modules if (fields := state_fields(cc))}
        if choose_tracer(which("bpftrace") is not None) == "tracefs":
            return self._start_tracefs(ctx, undo, ports, list(state_ccs))
        script = ctx.raw / "capture.bt"
        script.write_text(bpftrace_script(ports, state_ccs))
        tracer = ProcessCapture("bpftrace", ["bpftrace", str(script)], ctx.raw / "bpftrace.log")
        ctx.journal.add_process(tracer.pid, "bpftrace")
        undo.callback(tracer.stop)
        return tracer

    def _start_tracefs(self, ctx: StartContext, undo: Undo, ports: list[int], state_ccs: list[str]):
        root = tracefs.mounted()
        if root is None:
            ctx.warnings.append("no tracefs mounted; no tcp_probe or module state traces")
            return None
        recorder = tracefs.Recorder(root, tracefs_events(ports, state_ccs), ctx.raw / "tracefs.log")
        try:
            recorder.start()
        except tracefs.TracefsError as error:
            ctx.warnings.append(f"{error}; no tcp_probe or module state traces")
            return None
        ctx.journal.add_process(recorder.pid, "cat trace_pipe")

        def stop():
            lost = recorder.stop(stretch(tracefs.DRAIN_TIMEOUT_S))
            if lost:
                ctx.warnings.append(f"tracefs: {lost} events lost (buffer overrun): tcp_probe has gaps")

        undo.callback(stop)
        return recorder

    def warm_up(self, ctx: StartContext, tracer: ProcessCapture | tracefs.Recorder) -> None:
        if isinstance(tracer, tracefs.Recorder):
            if not tracer.alive():
                ctx.warnings.append("the tracefs reader ended at once; no tcp_probe or module state traces")
            return  # recording from the moment its events were enabled
        if not tracer.wait_for("Attaching", stretch(BPFTRACE_ATTACH_TIMEOUT_S)):
            ctx.warnings.append("bpftrace did not attach; no tcp_probe or module state traces")

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
