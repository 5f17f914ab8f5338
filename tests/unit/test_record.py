"""meta.json as one typed record (cctest/model/record.py): today's format still loads and round-trips,
an unknown version is refused in one line, and what a run writes has a typed home for every key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from cctest.analysis.load import ReportInputError, load_run
from cctest.base.errors import BAD_INPUT
from cctest.cli.main import main as cli_main
from cctest.cli.report import report_command
from cctest.emulation import engines, vm
from cctest.host import vmtime
from cctest.host.rundir import base_record, write_meta
from cctest.kernel import kmod
from cctest.model import record
from cctest.model.plan import expand
from cctest.model.scenario import parse_experiments
from tests import REPO

FIXTURE = REPO / "tests" / "fixtures" / "record" / "v1-meta.json"
REAL_RUN = REPO / "tests" / "fixtures" / "runs" / "cubic-bbr-shallow-20261121-231855-base-r0"

SCENARIO = """
scenarios:
  one:
    link: {rate_mbps: 10, rtt_ms: 20, buffer_bdp: 2, aqm: red, ecn: true,
           rate_schedule: [{at_s: 4, rate_mbps: 5}], outages: [{at_s: 6, duration_s: 1}]}
    duration_s: 12
    flows: [{cc: cubic}, {cc: bbr, start_s: 2}]
"""


def todays() -> dict:
    return json.loads(FIXTURE.read_text())


def test_a_record_of_todays_format_loads_as_version_1_and_round_trips():
    data = todays()
    assert "schema_version" not in data
    run = record.read_record(data, FIXTURE)
    assert run.schema_version == 1 and record.undeclared(run) == []
    assert run.link.rate_mbps == 40.0 and [f.cc for f in run.flows] == ["cubic", "bbr"]
    assert run.engine.name == "uml" and run.engine.kernel.patches == ["rng-seed.patch"]
    assert run.vm.phases["flows"].guest_s == 40.39 and run.modules[0].effective_params["beta"] == "717"
    assert run.dump() == data  # the same keys and values, ints kept ints (no schema_version added)
    assert run.to_json() == FIXTURE.read_text().rstrip("\n")  # written again, byte for byte


def test_the_report_reads_todays_record_into_the_model(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "meta.json")
    run = load_run(tmp_path)
    assert isinstance(run.record, record.RunRecord) and run.record.dump() == todays()
    assert run.run_id == "20261124-210346-f1.cc-bbr-r0"


@pytest.mark.parametrize("version", [2, 0, "1", True])
def test_an_unknown_version_is_refused_in_one_line_naming_file_and_version(tmp_path, version):
    run_dir = tmp_path / "run"
    shutil.copytree(REAL_RUN, run_dir)
    (run_dir / "meta.json").write_text(json.dumps({**todays(), "schema_version": version}))
    with pytest.raises(ReportInputError) as caught:
        load_run(run_dir)
    assert str(caught.value) == (f"{run_dir / 'meta.json'}: schema_version {version!r}, which this cctest "
                                 "does not read (it reads 1)")
    res = CliRunner().invoke(report_command, [str(run_dir), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == BAD_INPUT and res.output.strip() == f"error: {caught.value}"


def test_a_wrongly_typed_field_is_named_with_its_path(tmp_path):
    data = todays()
    data["vm"]["phases"]["flows"]["guest_s"] = "long"
    with pytest.raises(record.RecordError, match=r"^x: unreadable \(vm\.phases\.flows\.guest_s must be a finite "
                                                 r"number, not 'long'\)$"):
        record.read_record(data, "x")
    data = {**todays(), "flows": [{"flow": True}]}
    with pytest.raises(record.RecordError, match=r"flows\.0\.flow must be an integer, not True"):
        record.read_record(data, "x")


def test_the_link_fields_the_report_reads_come_from_the_model():
    assert record.LINK_NUMBERS == ("rate_mbps", "rtt_ms", "bdp_rtt_ms", "bdp_bytes", "buffer_bytes",
                                   "buffer_bdp", "loss_pct")
    assert record.LINK_SETTINGS == ("rate_mbps", "rtt_ms", "buffer_bdp", "loss_pct")


def _as_the_runner_fills_it(run: record.RunRecord, monkeypatch) -> record.RunRecord:
    """Every field the runner sets after base_record, each from the code that makes it."""
    monkeypatch.setenv("CCTEST_VM_CLOCK", "virtual")
    monkeypatch.setenv("CCTEST_VM_VCPUS", "1")
    run.phase_s = {}
    run.vm = vmtime.vm_record({"guest_s": 1.5, "wall_s": None})
    clock = vmtime.PhaseClock(run.phase_s, run.vm)
    clock.switch("flows")
    clock.switch(None)
    vmtime.add_totals(run.vm)
    loaded = kmod.LoadedModule("bbr3", {"beta_pct": 70}, "/x/bbr3.ko", "a" * 64, True, {"beta_pct": "70"}, "bbr3")
    assert run.modules is not None and run.flows is not None and run.warnings is not None
    run.modules.append(record.Module(**loaded.as_meta()))
    run.modules[0].fallbacks = 1
    run.fallback_sockets = 1
    run.tracefs = "mounted at /sys/kernel/tracing for this run, unmounted at its end"
    run.topology = "built"
    run.offloads = {"ccs1-btl": {"tso": "off", "gso": "off", "gro": "off"}}
    run.sysctls = {"net.ipv4.tcp_ecn": record.Sysctl(old="2", new="1", scope="each sender's namespace")}
    run.qdisc_plan = {"ccs1-btl": record.PlannedQdisc(role="bottleneck", node="root", tc=["qdisc replace dev x"])}
    run.t0_monotonic_ns, run.flows_started_at = 123, "2026-11-24T21:03:46.000+00:00"
    run.rate_schedule_applied = [record.AppliedRateStep(at_s=4.0, rate_mbps=5.0, applied_s=4.0012)]
    run.outages_applied = [record.AppliedOutage(at_s=6.0, duration_s=1.0, started_s=6.001, ended_s=None)]
    run.qdiscs = {"ccs1-btl": "qdisc netem 1: root"}
    run.status, run.error, run.end_time = "ok", None, "2026-11-24T21:04:16"
    run.flows[0].launched_s, run.flows[0].exit_code = 0.0012, 0
    run.warnings.append("link schedule: 1 of 2 changes applied")
    return run


def test_what_rundir_writes_is_a_valid_record(tmp_path, monkeypatch):
    monkeypatch.setenv("CCTEST_ENGINE_META", "{not json")  # the host's record, unreadable: said so
    (spec,) = expand(parse_experiments(SCENARIO, "exp.yaml"), "one")
    run = base_record(tmp_path, spec, "vm")
    write_meta(tmp_path, run)
    written = json.loads((tmp_path / "meta.json").read_text())
    assert written["schema_version"] == record.SCHEMA_VERSION and written["engine"]["name"] == "unknown"
    assert written["link"]["outages"] == [{"at_s": 6.0, "duration_s": 1.0}] and written["link"]["aqm"] == "red"
    write_meta(tmp_path, _as_the_runner_fills_it(run, monkeypatch))
    written = json.loads((tmp_path / "meta.json").read_text())
    run = record.read_record(written, "meta.json")
    assert record.undeclared(run) == [] and run.dump() == written
    assert run.vm.phases["flows"].wall_s is None and run.modules[0].params == {"beta_pct": 70}


def test_the_engines_records_have_a_typed_home():
    qemu = engines.QemuEngine(Path("/boot/vmlinuz-6.1.0-test"), vm.VMClock(shift=3)).meta()
    uml = json.loads(FIXTURE.read_text())["engine"]
    for data in (qemu, uml, {"name": "native"}, {"name": "unknown", "error": "unreadable CCTEST_ENGINE_META"}):
        assert record.undeclared(record.Engine.model_validate(data)) == [], data


def test_writing_refuses_a_key_without_a_field_and_a_value_of_the_wrong_type(tmp_path):
    (spec,) = expand(parse_experiments(SCENARIO, "exp.yaml"), "one")
    run = base_record(tmp_path, spec, "native")
    meta = run.dump()
    with pytest.raises(TypeError, match=r"without a field in cctest/model/record.py: novelty, flows\.1\.goodput"):
        novel = {**meta, "novelty": 1, "flows": [meta["flows"][0], {**meta["flows"][1], "goodput": 1}]}
        write_meta(tmp_path, record.RunRecord.model_validate(novel))
    assert run.link is not None and run.flows is not None
    run.link.rate_mbps = float("nan")  # set as the runner sets a field: not validated until written
    with pytest.raises(ValidationError, match="rate_mbps"):
        write_meta(tmp_path, run)
    run.link.rate_mbps, run.flows[0].exit_code = 10, "0"  # type: ignore[assignment]
    with pytest.raises(ValidationError, match="exit_code"), pytest.warns(UserWarning, match="serializer"):
        write_meta(tmp_path, run)
    assert not (tmp_path / "meta.json").exists()


def test_a_guest_records_the_commit_and_tool_versions_the_host_handed_in(monkeypatch):
    from cctest.host import rundir
    from cctest.model.guestplan import HostFacts

    monkeypatch.setattr(rundir, "_handed", None)
    host = rundir.host_facts()
    assert set(rundir.TOOL_VERSION_COMMANDS) | {"mininet"} == set(host.tools)
    assert host.commit == rundir.git_commit()
    handed = HostFacts(commit="f" * 40, tools={"iperf3": "iperf 3.12", "ping": "missing"})
    rundir.take_host_facts(handed)
    assert (rundir.git_commit(), rundir.tool_versions()) == (handed.commit, handed.tools)
    monkeypatch.setenv("CCTEST_GIT_COMMIT", "e" * 40)  # the host's override does not outrank its guest's plan
    assert rundir.git_commit() == handed.commit


@pytest.mark.parametrize("version", [2, "1", None])
def test_ingest_refuses_a_record_of_an_unknown_version_in_one_line_and_changes_nothing(tmp_path, version):
    run = tmp_path / "run"
    run.mkdir()
    meta = {**json.loads(FIXTURE.read_text()), "schema_version": version}
    (run / "meta.json").write_text(json.dumps(meta))
    result = CliRunner().invoke(cli_main, ["ingest", str(run)])
    assert result.exit_code == BAD_INPUT and "schema_version" in result.output, result.output
    assert sorted(p.name for p in run.iterdir()) == ["meta.json"]
    assert json.loads((run / "meta.json").read_text()) == meta
