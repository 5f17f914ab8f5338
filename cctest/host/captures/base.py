"""What every capture is: the raw files it writes, how a run starts it, and how its raw text
becomes tables (docs/run-directory.md is checked against the registry built from these)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported where used: the guest's run path starts without pandas
    import pandas as pd

    from ...model.record import Flow, RunRecord

NS_PER_S = 1_000_000_000
US_PER_MS = 1000.0

# The runner's phases in which a capture starts (Capture.starts), in the order they happen.
TRACING = "start tracing"  # before the topology: the tracer attaches while the hosts are built
SAMPLING = "samplers"  # once the topology exists, before time zero: steady by the time flows start
BASE_RTT = "warm-up: base RTT"  # after tracing has attached (attaching would inflate the pings)
PHASES = (TRACING, SAMPLING, BASE_RTT)



class Undo(Protocol):
    """Where a capture registers its stops (run/runner.py's Teardown): run last in, first out."""

    def callback(self, fn: Callable[..., Any], *args: Any) -> None: ...

@dataclass
class StartContext:
    """What a capture needs to start, filled in as the run's phases complete."""

    spec: Any  # plan.RunSpec
    raw: Path  # the run's raw/ directory
    journal: Any  # journal.Journal: every process started is recorded for `cctest clean`
    warnings: list[str]  # meta.json's warnings
    record: Any  # record.RunRecord: meta.json, filled in as the run goes
    with_tracer: bool = True  # whether a tracer serves here (tracer.choose_tracer)
    net: Any = None  # net.topology.Dumbbell, once built
    running: dict[str, Any] = field(default_factory=dict)  # capture name -> what start() returned


@dataclass
class RunView:
    """What parsing needs to know about the run (from its record), and what one capture's parse
    leaves for the others: iperf3's results and each flow's data-connection port."""

    run_id: str
    t0_ns: int
    flows: list[Flow]  # the record's flows, in flow order
    iperf: dict = field(default_factory=dict)  # flow -> iperf3.Iperf3Result
    ports: dict[int, int] = field(default_factory=dict)  # flow -> local port of its data connection
    parsed: dict[str, Any] = field(default_factory=dict)  # a parse shared by two steps, by raw name

    @classmethod
    def of(cls, record: RunRecord) -> RunView:
        """The view of a run's record; it must have its time zero (ingest gives a run that ended
        before time zero one)."""
        if record.t0_monotonic_ns is None:
            raise ValueError("a run without its time zero (t0_monotonic_ns) has no time to place samples at")
        return cls(run_id=str(record.run_id), t0_ns=record.t0_monotonic_ns,
                   flows=sorted(record.flows or [], key=flow_number))

    def t_s(self, t_ns: pd.Series) -> pd.Series:
        """CLOCK_MONOTONIC nanoseconds -> seconds after the run's time zero."""
        return (t_ns.astype("int64") - self.t0_ns) / NS_PER_S


def flow_number(flow: Flow) -> int:
    """A flow's number: a flow recorded without one has no raw files or rows to be placed in."""
    if flow.flow is None:
        raise ValueError(f"a flow in meta.json without its number ({flow.model_dump(exclude_unset=True)})")
    return flow.flow


def per_flow(pattern: str, flows: list[Flow]) -> list[str]:
    """A raw file name pattern with `<flow>` -> one name per flow (others as they are)."""
    if "<flow>" not in pattern:
        return [pattern]
    return [pattern.replace("<flow>", str(flow_number(f))) for f in flows]


class Capture:
    """One capture of a run. Subclasses set the class attributes and override what they do.

    raw_files: names under raw/ that parse() reads (`<flow>` stands for each flow's index);
    other_files: names it writes for people, not for ingest (logs, scripts, packet captures);
    tables: table name -> columns in contract order (docs/run-directory.md);
    required_columns: table name -> the columns the report cannot do without: a file lacking them
        is another table's or an old format, and is skipped (a table without an entry is not read);
    number_columns: table name -> the columns the report reads as numbers: each present must be
        numeric and never infinite;
    starts: the runner's phase in which start() runs (None: written by the flows themselves).
    """

    name: str = ""
    raw_files: tuple[str, ...] = ()
    other_files: tuple[str, ...] = ()
    tables: dict[str, tuple[str, ...]] = {}
    required_columns: dict[str, tuple[str, ...]] = {}
    number_columns: dict[str, tuple[str, ...]] = {}
    starts: str | None = None
    warm_up_phase: str | None = None  # a phase in which the runner waits for it to be ready

    def start(self, ctx: StartContext, undo: Undo) -> Any:
        """Start capturing; register every stop with `undo` (a runner.Teardown) at once. What it
        returns (not None) is kept in ctx.running and handed to warm_up()."""
        return None

    def warm_up(self, ctx: StartContext, handle: Any) -> None:
        """Wait until the capture records (runs in its own phase, warm_up_phase)."""

    def parse(self, raw: dict[str, str | None], run: RunView) -> dict[str, pd.DataFrame]:
        """raw file texts (None: absent) -> this capture's tables; a table whose input is absent is
        left out. Pure: no file access."""
        return {}

    def finish(self, table: str, df: pd.DataFrame, run: RunView,
               strings: tuple[str, ...] = ()) -> pd.DataFrame:
        """Add run_id, put columns in contract order and give them their contract dtypes."""
        df = df.copy()
        df["run_id"] = run.run_id
        df = df.reindex(columns=list(self.tables[table])).reset_index(drop=True)
        df["run_id"] = df["run_id"].astype("string")
        if "flow" in df:
            df["flow"] = df["flow"].astype("int64")
        if "t_s" in df:
            df["t_s"] = df["t_s"].astype("float64")
        for c in strings:
            df[c] = df[c].astype("string")
        return df


def num(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def map_by_ports(df: pd.DataFrame, run: RunView, sport: str, dport: str) -> pd.DataFrame:
    """Keep the rows of the flows' data connections and add a `flow` column."""
    import pandas as pd

    keys = pd.DataFrame([{sport: run.ports[flow_number(f)], dport: f.server_port, "flow": flow_number(f)}
                         for f in run.flows if flow_number(f) in run.ports],
                        columns=[sport, dport, "flow"])
    cols = [c for c in df.columns if c != "flow"]
    return df[cols].merge(keys.astype("int64"), on=[sport, dport], how="inner")


PYROUTE2_MISSING = "pyroute2 is not installed: `cctest run` needs the run extra (pip install 'cctest[run]')"


def pyroute2_installed() -> bool:
    """Whether the ss and qdisc samplers can run (they read netlink through pyroute2)."""
    import importlib.util

    return importlib.util.find_spec("pyroute2") is not None


def require_pyroute2(cls: Any) -> Any:
    """A pyroute2 class a sampler needs, or a one-line error naming the extra that installs it."""
    if cls is None:
        from ...base.errors import CctestError

        raise CctestError(PYROUTE2_MISSING)
    return cls
