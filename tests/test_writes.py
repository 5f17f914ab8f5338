"""Writes that a crash or a reader never sees half of, ingest failures that hide nothing, and
paths with spaces, quotes or '=' handled as paths."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

from cctest.cli import main
from cctest.ingest import write_tables
from cctest.net.topology import Dumbbell, TopologyError
from cctest.plan import expand
from cctest.scenario import parse_experiments
from cctest.session import finalize_each, read_manifest

REAL = Path(__file__).parent / "fixtures" / "runs" / "cubic-bbr-shallow-20261121-231855-base-r0"
EXPERIMENTS = ("scenarios: {s: {link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}, duration_s: 5, "
               "flows: [{cc: cubic}]}}\n")


def test_a_failed_table_write_leaves_the_old_table_whole(tmp_path):
    good = pd.DataFrame({"flow": [0, 1], "t_s": [0.1, 0.2]})
    write_tables(tmp_path, {"ss": good})
    bad = pd.DataFrame({"flow": [0], "t_s": [object()]})  # pyarrow cannot write this
    with pytest.raises(Exception):
        write_tables(tmp_path, {"ss": bad})
    assert pd.read_parquet(tmp_path / "ss.parquet").equals(good)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ss.parquet"]  # no temporary file left


def test_an_ingest_failure_neither_stops_the_others_nor_goes_unsaid(tmp_path):
    broken, good = tmp_path / "broken", tmp_path / "good"
    shutil.copytree(REAL, broken)
    shutil.copytree(REAL, good)
    (broken / "meta.json").write_text("{truncated")
    (good / "checks.json").unlink()
    failures: list[str] = []
    finalize_each([broken, good], Console(file=open("/dev/null", "w")), failures)
    assert len(failures) == 1 and failures[0].startswith(f"{broken / 'meta.json'}: not JSON (JSONDecodeError")
    assert json.loads((good / "checks.json").read_text())["verdict"] in ("pass", "warn", "fail")
    result = CliRunner().invoke(main, ["ingest", str(broken), str(good)])
    assert result.exit_code == 2  # a meta.json that is no JSON is bad input
    assert result.stderr.strip().splitlines() == [f"error: ingest failed for 1 of 2 run(s); the first: {failures[0]}"]


def test_the_manifest_is_read_by_line(tmp_path):
    manifest = tmp_path / "m.txt"
    manifest.write_text("/out dir/s/run a\n/out/s/run-b\n")
    assert read_manifest(manifest) == [Path("/out dir/s/run a"), Path("/out/s/run-b")]
    assert read_manifest(tmp_path / "absent") == []


def test_vm_out_with_equals_or_comma_is_refused(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENTS)
    for out in (tmp_path / "a=b", tmp_path / "a,b"):
        result = CliRunner().invoke(main, ["run", "s", "-f", str(exp), "--vm", "--out", str(out)])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [f"error: --out {out}: with --vm the path may not contain '=' or ','"]
        assert not out.exists()


def test_tc_batch_runs_from_an_argument_list(tmp_path, monkeypatch):
    """The batch file lives in TMPDIR: a space or a quote there must not reach a shell."""
    odd = tmp_path / "a dir with 'quotes' and $(touch pwned)"
    odd.mkdir()
    monkeypatch.setenv("TMPDIR", str(odd))
    monkeypatch.chdir(tmp_path)
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    spec = expand(parse_experiments(EXPERIMENTS, "x.yaml"), "s")[0]
    net = Dumbbell(spec, with_fq=False)
    net._tc([(None, ["qdisc show dev lo"])])  # read-only: needs no privileges
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(TopologyError, match="tc -b"):
        net._tc([(None, ["qdisc show dev cctest-no-such-iface"])])


@pytest.mark.parametrize("mode", ["--vm", "--native"])
def test_a_run_without_its_samplers_is_refused_before_anything_is_made(tmp_path, monkeypatch, mode):
    """Without pyroute2 the ss and qdisc samplers cannot start: a run would carry on with empty tables
    (paper-001's first suite run did). It is refused, naming the extra, before anything is set up."""
    import cctest.captures.base as base

    monkeypatch.setattr(base, "pyroute2_installed", lambda: False)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENTS)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", "s", "-f", str(exp), mode, "--out", str(out)])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and result.exit_code in (1, 2), result.output
    if lines != [f"error: {base.PYROUTE2_MISSING}"]:  # a host that cannot run natively says so first, naming it too
        assert mode == "--native" and "cannot run natively" in lines[0] and "pyroute2: not installed" in lines[0]
    assert not out.exists()
