"""Raw captures -> tidy tables (one row per sample, long format).

`cctest run` leaves verbatim tool output under ``<run_dir>/raw/``; this module turns it into the
parquet tables described in docs/run-directory.md.  Each capture (cctest/host/captures/, one class per
tool) owns its raw files, its parser and its tables; this module runs them in order:

* Parsers, one per raw format, each in its capture's module (cctest/host/captures/<name>.py, which
  names the raw file it reads): text in -> DataFrame (or plain data) out.
  They know nothing about the run: timestamps stay raw CLOCK_MONOTONIC nanoseconds (``t_ns``) and
  sockets stay identified by their ports.  They never raise on malformed input; unreadable lines
  are skipped.

* ``ingest_run(run_dir)`` reads the parts of meta.json it needs (READS), runs the parsers, maps
  sockets to flows, converts time to ``t_s`` (seconds after the run's time zero) and writes
  ``<table>.parquet``.

Socket -> flow mapping: flow i's data connection is the socket whose local port is iperf3's
``start.connected[0].local_port`` and whose remote port is the flow's ``server_port``.  The
iperf3 control connection shares the remote port and is dropped.  If iperf3's JSON is missing
(interrupted run) the data connection is taken to be the socket to ``server_port`` that
acknowledged the most bytes in ss.jsonl (the control connection carries a few hundred bytes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..base import atomic
from ..base.safeload import Refused
from ..host.captures import IPERF3, REGISTRY, SOCKETS, TABLES, RunView, raw_names
from ..host.captures.base import flow_number
from ..model import runfiles
from ..model.record import RunRecord, read_parts

MAX_RAW_BYTES = 4 << 30  # a raw capture of hours of per-ACK tracing stays far below
# The record's fields the tables are made from: a run whose other fields the report refuses (a
# malformed matrix) still has its tables made.
READS = ("run_id", "t0_monotonic_ns", "flows")


def _read(run_dir: Path, name: str) -> str | None:
    """A raw capture's text, None when absent; Refused when it is a link, a FIFO or a device: a
    capture that cannot be read is never taken for one the run did not make."""
    data = runfiles.read_bytes(run_dir, f"raw/{name}", MAX_RAW_BYTES, "a raw capture")
    return None if data is None else data.decode(errors="replace")


def data_ports(run: RunView, ss_raw: pd.DataFrame | None) -> dict[int, int]:
    """flow -> local port of its data connection (see module docstring)."""
    ports: dict[int, int] = {}
    for f in run.flows:
        i = flow_number(f)
        res = run.iperf.get(i)
        if res is not None and res.local_port is not None:
            ports[i] = res.local_port
        elif ss_raw is not None and not ss_raw.empty:
            cand = ss_raw[(ss_raw["flow"] == i) & (ss_raw["peer_port"] == f.server_port)]
            acked = cand.groupby("local_port")["bytes_acked"].max().dropna()
            if not acked.empty:
                ports[i] = int(acked.idxmax())
    return ports


def build_tables(record: RunRecord, raw: dict[str, str | None]) -> dict[str, pd.DataFrame]:
    """The run's record + raw file texts -> tables.  Pure: no file access.

    ``raw`` maps raw file names ("ss.jsonl", "iperf3-0.json", ...) to their text or None.
    """
    run = RunView.of(record)
    run.iperf = IPERF3.results(raw, run)
    run.ports = data_ports(run, SOCKETS.sockets(raw, run))
    tables: dict[str, pd.DataFrame] = {}
    for capture in REGISTRY:
        tables.update(capture.parse(raw, run))
    recover_from_ss(tables, run)
    return {name: tables[name] for name in TABLES if name in tables}


def recover_from_ss(tables: dict[str, pd.DataFrame], run: RunView) -> None:
    """Each flow iperf3 left no summary for (its client was SIGKILLed: `-J` writes only at exit),
    from its ss samples instead: bytes acknowledged (tcpi_bytes_acked, every byte the receiver has)
    as bytes_sent and bytes_received, and its throughput rows from their growth between samples
    (the first from the flow's launch). The flows table's totals_from says "ss" for these."""
    flows, ss = tables.get("flows"), tables.get("ss")
    if flows is None or ss is None or ss.empty:
        return
    launched = {flow_number(f): next((float(t) for t in (f.launched_s, f.start_s) if t is not None), 0.0)
                for f in run.flows}
    parts = []
    for row in flows.itertuples():
        if row.totals_from is not pd.NA and row.totals_from is not None:
            continue
        samples = ss[(ss["flow"] == row.flow) & ss["bytes_acked"].notna()].sort_values("t_s")
        if samples.empty:
            continue
        acked = samples["bytes_acked"].cummax()  # a counter: a sample never lowers it
        total = int(acked.iloc[-1])
        flows.loc[row.Index, ["bytes_sent", "bytes_received"]] = total
        retrans = samples["retrans_total"].max()
        flows.loc[row.Index, "retransmits"] = pd.NA if pd.isna(retrans) else int(retrans)
        flows.loc[row.Index, "totals_from"] = "ss"
        if "throughput" in tables and (tables["throughput"]["flow"] == row.flow).any():
            continue  # iperf3's own intervals (a truncated document) stay
        t = [launched.get(int(row.flow), 0.0), *samples["t_s"]]
        grown = [0.0, *acked]
        rows = pd.DataFrame({"flow": int(row.flow), "t_s": t[1:], "interval_s": pd.Series(t).diff().iloc[1:].values,
                             "bytes": pd.Series(grown).diff().iloc[1:].values,
                             "retransmits": samples["retrans_total"].diff().fillna(samples["retrans_total"]).values,
                             "snd_cwnd_bytes": (samples["cwnd"] * samples["mss"]).values,
                             "rtt_ms": samples["srtt_ms"].values})
        rows = rows[rows["interval_s"] > 0]
        rows["bits_per_second"] = rows["bytes"] * 8 / rows["interval_s"]
        parts.append(rows)
    if parts:
        recovered = IPERF3.finish("throughput", pd.concat(parts), run)
        old = tables.get("throughput")
        tables["throughput"] = recovered if old is None or old.empty else pd.concat([old, recovered], ignore_index=True)


def read_meta(run_dir: Path) -> dict:
    """A run directory's meta.json as JSON (bounded: never a FIFO's endless wait), a Refused naming
    the file otherwise: the object the record's door (model/record.py) reads. Its format version is
    the caller's to check (record.check_version)."""
    meta = runfiles.read_json(run_dir, "meta.json")
    if meta is None:
        raise Refused(f"{run_dir / 'meta.json'}: absent; a run directory holds its meta.json")
    if not isinstance(meta, dict):
        raise Refused(f"{run_dir / 'meta.json'}: not a JSON object; a meta.json is one")
    return meta


def is_compact(run_dir: Path) -> bool:
    """Tables without the raw captures they were made from: remaking them would lose them."""
    return not os.path.lexists(run_dir / "raw") and runfiles.table_present(run_dir, "flows")


def read_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    tables = {name: runfiles.read_table(run_dir, name) for name in TABLES}
    return {name: table for name, table in tables.items() if table is not None}


def load_raw(run_dir: str | Path, record: RunRecord) -> dict[str, str | None]:
    """Read the raw files build_tables needs; absent files map to None."""
    return {n: _read(Path(run_dir), n) for n in raw_names(record.flows or [])}


def write_tables(run_dir: str | Path, tables: dict[str, pd.DataFrame]) -> None:
    """Write each table as ``<run_dir>/<name>.parquet`` (pyarrow, no index)."""
    for name, df in tables.items():
        with atomic.replacing(Path(run_dir) / f"{name}.parquet") as f:
            df.to_parquet(f, engine="pyarrow", index=False)


PRODUCTS = ("meta.json", "checks.json", *(f"{name}.parquet" for name in TABLES))


def check_products(run_dir: Path) -> None:
    """Before anything is rewritten: each file ingest writes in a run is absent or a regular file of
    its own (a link planted in a shared run would otherwise be replaced, its owner unaware)."""
    for name in PRODUCTS:
        atomic.check_replaceable(run_dir / name, f"a run's {name}")


def check_remakeable(run_dir: Path, record: RunRecord, raw: dict[str, str | None]) -> None:
    """A run that measured something, whose raw/ holds none of its captures while its tables exist:
    remaking them would replace its data with empty tables."""
    if record.t0_monotonic_ns is None or any(text is not None for text in raw.values()):
        return
    if any(runfiles.table_present(run_dir, name) for name in TABLES):
        raise Refused(f"{run_dir / 'raw'}: holds none of the run's captures while its tables exist; remaking "
                      "them would empty them (a compact run, whose tables are kept as they are, has no raw/)")


def ingest_run(run_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Read ``meta.json`` (READS) and ``raw/`` of a run directory, write ``<table>.parquet``, return them.

    Tables whose raw input is absent are omitted; ``flows`` is always present. A compact run
    directory (its tables kept, its raw captures not) has nothing to
    remake: its stored tables are returned as they are, for its health to be judged again.
    """
    run_dir = Path(run_dir)
    data = read_meta(run_dir)
    if is_compact(run_dir):
        return read_tables(run_dir)
    check_products(run_dir)
    record = read_parts(data, READS, run_dir / "meta.json")
    raw = load_raw(run_dir, record)
    check_remakeable(run_dir, record, raw)
    if record.t0_monotonic_ns is None:
        # The run ended before time zero (failed or interrupted during set-up): no sample has a
        # time to be placed at, so only the flows' identities are kept.
        raw = {name: None for name in raw}
        record = record.model_copy(update={"t0_monotonic_ns": 0})
    tables = build_tables(record, raw)
    write_tables(run_dir, tables)
    return tables
