"""Module state: a project module's `<cc>:state` tracepoint, recorded by the tcp_probe capture's
bpftrace process (one process, one raw file: raw/bpftrace.log's S lines) -> the cc_state table."""

from __future__ import annotations

import re

import pandas as pd

from .. import tracefs
from .base import Capture, RunView, map_by_ports

_X1000 = "_x1000"  # a cc_state field `<x>_x1000` carries x scaled by 1000


def state_fields(cc: str) -> list[tuple[str, str]]:
    """(name, C type) of a module's `<cc>:state` tracepoint fields after sport and dport."""
    root = tracefs.mounted()  # the runner mounted it if it was absent (cctest/tracefs.py)
    if root is None:
        return []
    fmt = root / "events" / cc / "state" / "format"
    if not fmt.exists():
        return []
    fields = re.findall(r"field:([^;]+?)\s+(\w+);", fmt.read_text())
    return [(name, ctype) for ctype, name in fields if not name.startswith("common_") and name not in ("sport", "dport")]


def parse_cc_state(text: str) -> pd.DataFrame:
    """``S <cc> <t_ns> <sport> <dport> <field>=<int> ...`` lines -> long format.

    Columns: t_ns, cc, sport, dport, key, value (float).  ``<x>_x1000=<n>`` becomes key ``x``
    with value n/1000.  Fields that are not ``name=integer`` are skipped.
    """
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


class ModuleState(Capture):
    name = "cc_state"
    raw_files = ("bpftrace.log",)
    tables = {"cc_state": ("run_id", "flow", "t_s", "cc", "key", "value")}
    starts = None  # its probes are part of the tcp_probe capture's bpftrace script

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        if raw.get("bpftrace.log") is None:
            return {}
        state = parse_cc_state(raw["bpftrace.log"])
        if state.empty:
            return {}
        state = map_by_ports(state, run, "sport", "dport")
        state["t_s"] = run.t_s(state["t_ns"])
        return {"cc_state": self.finish("cc_state", state, run, strings=("cc", "key"))}
