"""The capture registry (cctest/host/captures/) against docs/run-directory.md and its other readers:
one definition of table names, columns and raw file names; and the one tracer the per-packet
captures add their probes to."""

import re
from types import SimpleNamespace

import pytest

from cctest.analysis import ingest, load
from cctest.host import captures, tracefs
from cctest.host.captures import cc_state, tracer
from cctest.host.captures.base import PHASES, TRACING
from cctest.host.captures.tracer import TracedCapture, Tracer
from cctest.model.plan import expand
from cctest.model.record import Flow, RunRecord
from cctest.model.scenario import parse_experiments
from cctest.run.runner import Teardown
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
    """Every raw file the registry names, once per flow where it is a flow's, and each name once."""
    names = captures.raw_names([Flow(flow=0), Flow(flow=1)])
    patterns = {pattern for capture in captures.REGISTRY for pattern in capture.raw_files}
    assert set(names) == {pattern.replace("<flow>", str(flow)) for pattern in patterns for flow in (0, 1)}
    assert {"iperf3-0.json", "iperf3-1.json", "ss.jsonl"} <= set(names)
    assert len(names) == len(set(names))  # the tracer's log, read by every traced capture, once


# -- the run's one tracer ----------------------------------------------------------------------------

TRACED = """
defaults: {link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}, duration_s: 5}
scenarios:
  traced:
    flows: [{cc: cubic}, {cc: bbr_cws, count: 2}]
  untraced:
    flows: [{cc: bbr_cws}]
    capture: {tcp_probe: false}
"""
TRACER = captures.REGISTRY[0]


class Journal:
    def __init__(self):
        self.processes = []

    def add_process(self, pid, what):
        self.processes.append(what)

    def add_mount(self, path):
        pytest.fail(f"journaled a mount of {path}: tracefs was there")


def start_context(name: str, raw, **options) -> captures.StartContext:
    (spec,) = expand(parse_experiments(TRACED, "exp.yaml"), name)
    return captures.StartContext(spec, raw, Journal(), [], record=RunRecord(), **options)


def test_every_traced_capture_adds_its_probes_to_the_one_tracer():
    assert isinstance(TRACER, Tracer) and captures.starting_in(TRACING) == [TRACER]
    assert TRACER.traced == tuple(c for c in captures.REGISTRY if isinstance(c, TracedCapture))
    assert all(c.label and c.starts is None and set(c.raw_files) == set(tracer.LOGS) for c in TRACER.traced)


def test_the_bpftrace_script_holds_each_captures_probes_in_registry_order(tmp_path, monkeypatch):
    monkeypatch.setattr(cc_state, "state_fields", lambda cc: [("mode", "u32"), ("gain_x1000", "u64")]
                        if cc == "bbr_cws" else [])
    monkeypatch.setattr(tracefs, "mount_if_absent", lambda journal_mount: None)  # there already
    monkeypatch.setattr(tracer, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.delenv("CCTEST_TRACER", raising=False)
    monkeypatch.delenv("CCTEST_VM_ENGINE", raising=False)
    monkeypatch.setattr(tracer, "ProcessCapture", lambda name, cmd, log: SimpleNamespace(pid=1, stop=None))
    ctx = start_context("traced", tmp_path)
    assert TRACER.start(ctx, Teardown([])) is not None and ctx.journal.processes == ["bpftrace"]
    assert (tmp_path / "capture.bt").read_text() == "\n".join([
        "tracepoint:tcp:tcp_probe /args->dport >= 5201 && args->dport <= 5203/ {",
        "  if (nsecs - @last[args->sport] >= 10000000) {",
        "    @last[args->sport] = nsecs;",
        '    printf("P %llu %u %u %u %u %u %u %u\\n", nsecs, args->sport, args->dport, args->snd_cwnd,',
        "           args->ssthresh, args->srtt, args->snd_wnd, args->rcv_wnd);",
        "  }",
        "}",
        "tracepoint:bbr_cws:state /args->dport >= 5201 && args->dport <= 5203/ {",
        '  printf("S bbr_cws %llu %u %u mode=%lld gain_x1000=%lld\\n", nsecs, args->sport, args->dport, '
        '(int64)args->mode, (int64)args->gain_x1000);',
        "}",
        "END { clear(@last); }",
    ]) + "\n"
    probes = [c.probes(ctx) for c in TRACER.wanted(ctx.spec)]
    assert tracer.tracefs_events([p for p in probes if p]) == [
        ("tcp", "tcp_probe", "dport >= 5201 && dport <= 5203"), ("bbr_cws", "state", "dport >= 5201 && dport <= 5203")]


def test_no_tracer_starts_or_mounts_tracefs_when_no_capture_traces_or_none_can(tmp_path, monkeypatch):
    monkeypatch.setattr(tracefs, "mount_if_absent", lambda journal_mount: pytest.fail("mounted tracefs"))
    assert TRACER.start(start_context("untraced", tmp_path), Teardown([])) is None
    assert TRACER.start(start_context("traced", tmp_path, with_tracer=False), Teardown([])) is None


def test_a_failed_tracer_names_what_the_run_lacks(tmp_path):
    assert TRACER.lacking(start_context("traced", tmp_path)) == "no tcp_probe or module state traces"
    assert tracer.listed(["a", "b", "c"], "and") == "a, b and c" and tracer.listed(["a"], "or") == "a"


@pytest.mark.parametrize("capture", captures.REGISTRY, ids=lambda c: c.name)
def test_parse_of_absent_input_gives_no_table_but_flows(capture):
    """A run whose raw files are all absent: only flows (from meta.json) comes out."""
    run = captures.RunView.of(RunRecord.model_validate({"run_id": "r", "t0_monotonic_ns": 0,
                                                        "flows": [{"flow": 0, "cc": "cubic", "server_port": 5201}]}))
    tables = capture.parse({}, run)
    assert list(tables) == (["flows"] if "flows" in capture.tables else [])
