"""The capture registry (cctest/host/captures/) against docs/run-directory.md and its other readers:
one definition of table names, columns and raw file names."""

import re

import pytest

from cctest.analysis import ingest, load
from cctest.host import captures
from cctest.host.captures.base import PHASES
from cctest.model.record import Flow, RunRecord
from tests import REPO

DOC = (REPO / "docs" / "run-directory.md").read_text()


def doc_tree() -> str:
    """The run directory's tree: the first code block."""
    return DOC.split("```")[1]


def doc_table_columns(doc: str = DOC) -> dict[str, list[str]]:
    """'- <table>: col (note), col, ... . Prose.' bullets of the Tables section -> columns."""
    section = doc.split("## Tables", 1)[1]
    out = {}
    for bullet in re.findall(r"^- (\w+): (.*?)(?=^- |^\s*$)", section, re.M | re.S):
        name, text = bullet
        while re.search(r"\([^()]*\)", text):
            text = re.sub(r"\([^()]*\)", "", text)  # notes, innermost first
        first_sentence = re.split(r"\.(\s|$)", text, maxsplit=1)[0]
        out[name] = [col.strip() for col in first_sentence.split(",")]
    return out


def test_doc_lists_every_table_and_no_other():
    assert sorted(re.findall(r"(\w+)\.parquet", doc_tree())) == sorted(captures.TABLES)


def test_doc_columns_are_the_registry_columns():
    documented = doc_table_columns()
    assert sorted(documented) == sorted(captures.TABLES)
    for table in captures.TABLES:
        assert documented[table] == captures.COLUMNS[table], table


def test_doc_names_every_raw_file():
    tree = doc_tree()
    for capture in captures.REGISTRY:
        for pattern in capture.raw_files + capture.other_files:
            assert pattern in tree, f"{capture.name}: {pattern} not in docs/run-directory.md"


def test_doc_check_sees_an_edit():
    """The column check can fail: a column dropped from, or added to, the page is seen."""
    dropped = DOC.replace("- ping: run_id, flow, seq, rtt_ms.", "- ping: run_id, flow, rtt_ms.")
    added = DOC.replace("busy_frac (share", "busy_frac, idle_frac (share")
    assert dropped != DOC and added != DOC
    assert doc_table_columns(dropped)["ping"] != captures.COLUMNS["ping"]
    assert doc_table_columns(added)["cpu"] != captures.COLUMNS["cpu"]


def test_table_names_are_unique_and_phases_known():
    names = [table for capture in captures.REGISTRY for table in capture.tables]
    assert len(names) == len(set(names))
    assert len({c.name for c in captures.REGISTRY}) == len(captures.REGISTRY)
    for capture in captures.REGISTRY:
        assert capture.starts in PHASES + (None,), capture.name
        assert capture.tables or capture.other_files, capture.name  # a capture leaves something


def test_ingest_and_report_use_the_registry():
    assert ingest.TABLES is captures.TABLES
    assert set(load.TABLES) <= set(captures.TABLES)
    for table, (required, numeric) in load.SCHEMA.items():
        assert table in captures.TABLES
        assert required | numeric <= set(captures.COLUMNS[table]), table


def test_raw_names_per_flow():
    flows = [Flow(flow=0), Flow(flow=1)]
    names = captures.raw_names(flows)
    assert {"iperf3-0.json", "iperf3-1.json", "ping-0.txt", "ping-1.txt", "ss.jsonl", "qdisc.log",
            "bpftrace.log", "tracefs.log", "cpu.jsonl"} == set(names)
    assert len(names) == len(set(names))  # bpftrace.log and tracefs.log, each read by two captures, once


@pytest.mark.parametrize("capture", captures.REGISTRY, ids=lambda c: c.name)
def test_parse_of_absent_input_gives_no_table_but_flows(capture):
    """A run whose raw files are all absent: only flows (from meta.json) comes out."""
    run = captures.RunView.of(RunRecord.model_validate({"run_id": "r", "t0_monotonic_ns": 0,
                                                        "flows": [{"flow": 0, "cc": "cubic", "server_port": 5201}]}))
    tables = capture.parse({}, run)
    assert list(tables) == (["flows"] if "flows" in capture.tables else [])
