"""Module state: a project module's `<cc>:state` tracepoint, recorded by the run's tracer
(tracer.py: raw/bpftrace.log's S lines, or raw/tracefs.log's `state` events) -> the cc_state table."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .. import tracefs
from .base import RunView, StartContext, flow_number, map_by_ports
from .tracer import Probes, ServerPorts, TracedCapture

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

_X1000 = "_x1000"  # a cc_state field `<x>_x1000` carries x scaled by 1000


def state_fields(cc: str) -> list[tuple[str, str]]:
    """(name, C type) of a module's `<cc>:state` tracepoint fields after sport and dport."""
    root = tracefs.mounted()  # the tracer mounted it if it was absent (tracer.py)
    if root is None:
        return []
    fmt = root / "events" / cc / "state" / "format"
    if not fmt.exists():
        return []
    fields = re.findall(r"field:([^;]+?)\s+(\w+);", fmt.read_text())
    return [(name, ctype) for ctype, name in fields
            if not name.startswith("common_") and name not in ("sport", "dport")]


def parse_cc_state(text: str) -> pd.DataFrame:
    """``S <cc> <t_ns> <sport> <dport> <field>=<int> ...`` lines -> long format.

    Columns: t_ns, cc, sport, dport, key, value (float).  ``<x>_x1000=<n>`` becomes key ``x``
    with value n/1000.  Fields that are not ``name=integer`` are skipped.
    """
    import pandas as pd

    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] != "S":
            continue
        try:
            t_ns, sport, dport = int(parts[2]), int(parts[3]), int(parts[4])
        except ValueError:
            continue
        for item in parts[5:]:
            key, sep, value = item.partition("=")
            try:
                number = int(value)
            except ValueError:
                continue
            if not sep or not key:
                continue
            if key.endswith(_X1000) and len(key) > len(_X1000):
                key, val = key[: -len(_X1000)], number / 1000.0
            else:
                val = float(number)
            rows.append({"t_ns": t_ns, "cc": parts[1], "sport": sport, "dport": dport,
                         "key": key, "value": val})
    return pd.DataFrame(rows, columns=["t_ns", "cc", "sport", "dport", "key", "value"])


def parse_tracefs_state(text: str) -> pd.DataFrame:
    """The modules' `state` events of a tracefs log -> parse_cc_state's long format, with cc empty:
    trace lines name the event (`state`), not its system (the module), so the cc is the flow's,
    filled in once the ports name the flow."""
    import pandas as pd

    rows = []
    for t_ns, values in tracefs.events(text, "state"):
        try:
            sport, dport = int(values.pop("sport")), int(values.pop("dport"))
        except (KeyError, ValueError):
            continue
        for key, value in values.items():
            try:
                number = int(value)
            except ValueError:
                continue
            if key.endswith(_X1000) and len(key) > len(_X1000):
                key, val = key[: -len(_X1000)], number / 1000.0
            else:
                val = float(number)
            rows.append({"t_ns": t_ns, "cc": None, "sport": sport, "dport": dport, "key": key, "value": val})
    return pd.DataFrame(rows, columns=["t_ns", "cc", "sport", "dport", "key", "value"])


class ModuleState(TracedCapture):
    name = "cc_state"
    label = "module state"
    tables = {"cc_state": ("run_id", "flow", "t_s", "cc", "key", "value")}
    required_columns = {"cc_state": ("flow", "t_s", "key", "value")}
    number_columns = {"cc_state": ("flow", "t_s", "value")}

    def traces(self, spec: Any) -> bool:
        # no switch of its own: a module's state is read beside the per-ACK trace it explains
        return bool(spec.scenario.capture.tcp_probe)

    def probes(self, ctx: StartContext) -> Probes | None:
        state_ccs = {cc: fields for cc in ctx.spec.modules if (fields := state_fields(cc))}
        if not state_ccs:
            return None
        ports = ServerPorts.of(ctx.spec)
        lines = []
        for cc, fields in state_ccs.items():
            fmt = " ".join(f"{name}=%lld" for name, _ in fields)
            values = "".join(f", (int64)args->{name}" for name, _ in fields)
            lines += [
                f"tracepoint:{cc}:state {ports.bpftrace} {{",
                f'  printf("S {cc} %llu %u %u {fmt}\\n", nsecs, args->sport, args->dport{values});',
                "}",
            ]
        return Probes(bpftrace=lines, events=[(cc, "state", ports.tracefs) for cc in state_ccs])

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        tracefs_log, bpftrace_log = raw.get("tracefs.log"), raw.get("bpftrace.log")
        from_tracefs = tracefs_log is not None
        if tracefs_log is not None:
            state = parse_tracefs_state(tracefs_log)
        elif bpftrace_log is not None:
            state = parse_cc_state(bpftrace_log)
        else:
            return {}
        if state.empty:
            return {}
        state = map_by_ports(state, run, "sport", "dport")
        if from_tracefs:
            cc_of = {flow_number(f): f.cc for f in run.flows}
            state["cc"] = state["flow"].map(cc_of)
        state["t_s"] = run.t_s(state["t_ns"])
        return {"cc_state": self.finish("cc_state", state, run, strings=("cc", "key"))}
