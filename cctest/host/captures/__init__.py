"""The captures of a run, as units: each is one class (raw files, start, parse, tables and columns).

REGISTRY drives everything that depends on which captures exist: the runner starts each in its
phase (run/runner.py), ingest parses each (analysis/ingest.py), the report loads their tables (analysis/load.py),
and docs/run-directory.md is checked against it (tests/unit/test_captures.py). A per-packet capture
is a TracedCapture (tracer.py): it adds probes to the run's one tracer, which is in REGISTRY too.

Adding a capture touches two source files, three with an option of its own: its class (a Capture,
or a TracedCapture, in its own module: raw files, start or probes, parse, tables with their columns),
its line in CAPTURES, and its option in model/scenario.py's CaptureSettings; then its tables and raw
files in docs/run-directory.md, and its tests (docs/extending.md). A figure of it is one step in
report/run_figures.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import BASE_RTT, SAMPLING, TRACING, Capture, RunView, StartContext, per_flow
from .cc_state import ModuleState
from .cpu import Cpu
from .iperf3 import Iperf3
from .pcap import Pcap
from .ping import Ping
from .qdisc import Qdisc
from .sockdiag import SockDiag
from .tcp_probe import TcpProbe
from .tracer import Tracer

if TYPE_CHECKING:
    from ...model.record import Flow

IPERF3 = Iperf3()
SOCKETS = SockDiag()

# In table order: the order ingest returns the tables in.
CAPTURES: tuple[Capture, ...] = (IPERF3, SOCKETS, TcpProbe(), Qdisc(), ModuleState(), Ping(), Cpu(), Pcap())
# ...and the run's one tracer, which the TracedCaptures among them add their probes to.
REGISTRY: tuple[Capture, ...] = (Tracer(CAPTURES), *CAPTURES)

TABLES: tuple[str, ...] = tuple(table for capture in REGISTRY for table in capture.tables)
COLUMNS: dict[str, list[str]] = {table: list(columns) for capture in REGISTRY
                                 for table, columns in capture.tables.items()}


def starting_in(phase: str) -> list[Capture]:
    return [capture for capture in REGISTRY if capture.starts == phase]


def raw_names(flows: list[Flow]) -> list[str]:
    """The raw files ingest reads for a run with these flows (its record's), each once."""
    names = [name for capture in REGISTRY for pattern in capture.raw_files for name in per_flow(pattern, flows)]
    return list(dict.fromkeys(names))


__all__ = ["BASE_RTT", "COLUMNS", "REGISTRY", "SAMPLING", "TABLES", "TRACING", "Capture", "RunView", "StartContext",
           "raw_names", "starting_in"]
