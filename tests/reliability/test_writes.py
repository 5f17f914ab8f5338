"""Writes that a crash or a reader never sees half of, ingest failures that hide nothing, and
paths with spaces, quotes or '=' handled as paths."""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from rich.console import Console

from cctest.analysis.ingest import write_tables
from cctest.cli.main import main
from cctest.host.net.topology import Dumbbell, TopologyError
from cctest.model.plan import expand
from cctest.model.scenario import parse_experiments
from cctest.run.session import finalize_each, read_manifest
from tests import REPO

REAL = REPO / "tests" / "fixtures" / "runs" / "cubic-bbr-shallow-20261121-231855-base-r0"
EXPERIMENTS = ("scenarios: {s: {link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}, duration_s: 5, "
               "flows: [{cc: cubic}]}}\n")


def test_a_failed_table_write_leaves_the_old_table_whole(tmp_path):
    good = pd.DataFrame({"flow": [0, 1], "t_s": [0.1, 0.2]})
    write_tables(tmp_path, {"ss": good})
    bad = pd.DataFrame({"flow": [0], "t_s": [object()]})  # pyarrow cannot write this
    with pytest.raises(pa.ArrowException):
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
    assert read_manifest(manifest) == ["/out dir/s/run a", "/out/s/run-b"]
    assert read_manifest(tmp_path / "absent") == []


def test_vm_out_with_equals_or_comma_is_refused(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENTS)
    for out in (tmp_path / "a=b", tmp_path / "a,b"):
        result = CliRunner().invoke(main, ["run", "s", "-f", str(exp), "--vm", "--out", str(out)])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"error: --out {out}: with --vm the path may not contain '=' or ','"]
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
    import cctest.host.captures.base as base

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


# --- the one writer: never through a link, never over an input, nothing written when refused -----

RECORDED = (REPO / "tests" / "fixtures" / "runs"
            / "variants-vs-cubic-20261121-232839-bufferbdp-0.5_f1.cc-bbrcws-r0")


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry below `folder`: a file's bytes, a link's target."""
    return {str(p.relative_to(folder)): (f"-> {os.readlink(p)}" if p.is_symlink() else p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


def test_temporary_files_have_unpredictable_names(tmp_path, monkeypatch):
    """A link planted at the name a table's temporary file used to get (.<name>.<pid>.tmp) is never
    written through."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "run").mkdir()
    for name in ("ss.parquet", "checks.json"):
        (tmp_path / "run" / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
    write_tables(tmp_path / "run", {"ss": pd.DataFrame({"flow": [0], "t_s": [0.1]})})
    from cctest.base import atomic
    atomic.write_text(tmp_path / "run" / "checks.json", "{}")
    assert victim.read_text() == "precious"
    assert pd.read_parquet(tmp_path / "run" / "ss.parquet")["flow"].tolist() == [0]
    assert oct((tmp_path / "run" / "checks.json").stat().st_mode & 0o777) != "0o600"  # readable by others


@pytest.mark.parametrize("link", ["checks.json", "flows.parquet", "meta.json"])
def test_ingest_never_writes_through_a_link_in_a_shared_run(tmp_path, link):
    run = tmp_path / "run"
    shutil.copytree(REAL, run)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (run / link).unlink()
    (run / link).symlink_to(victim)
    before = _snapshot(run)
    result = CliRunner().invoke(main, ["ingest", str(run)])
    assert result.exit_code == 2, result.output
    assert f"{link}: is a symbolic link" in result.stderr and "Traceback" not in result.output
    assert victim.read_text() == "precious" and _snapshot(run) == before


def test_ingest_of_an_empty_raw_folder_keeps_the_tables(tmp_path):
    """raw/ present but empty would remake the flows table with null totals: refused, tables kept."""
    run = tmp_path / "run"
    shutil.copytree(REAL, run)
    (run / "raw").mkdir()
    before = _snapshot(run)
    result = CliRunner().invoke(main, ["ingest", str(run)])
    assert result.exit_code == 2 and "holds none of the run's captures" in result.stderr, result.output
    assert _snapshot(run) == before


def _claims_run(tmp_path: Path) -> Path:
    """A copy of a recorded run whose scenario.yaml carries a claim and a paper tag."""
    import yaml

    run = tmp_path / "runs" / "r"
    shutil.copytree(RECORDED, run)
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    resolved.update(tags=["paper-000"], expect=[{"claim": "share(bbr_cws) > 0"}])
    (run / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    return run


def _refused(tmp_path: Path, args: list[str], message: str) -> None:
    """The command exits 2 with one line containing `message`, and no file under tmp_path changed."""
    before = _snapshot(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
    assert _snapshot(tmp_path) == before


def test_check_refuses_the_same_file_as_page_and_readme(tmp_path):
    run = _claims_run(tmp_path)
    (tmp_path / "README.md").write_text("# x\n<!-- reproduction-score -->\n")
    _refused(tmp_path, ["check", str(run), "-o", str(tmp_path / "claims.json"), "--markdown",
                        str(tmp_path / "README.md"), "--readme", str(tmp_path / "README.md")],
             "given as both --markdown (the reproduction page) and --readme")


def test_check_refuses_a_readme_without_its_score_line_before_writing(tmp_path):
    run = _claims_run(tmp_path)
    (tmp_path / "README.md").write_text("# no marker here\n")
    (tmp_path / "exp.yaml").write_text(EXPERIMENTS)
    _refused(tmp_path, ["check", str(run), "-o", str(tmp_path / "claims.json"), "-f", str(tmp_path / "exp.yaml"),
                        "--markdown", str(tmp_path / "page.md"), "--readme", str(tmp_path / "README.md")],
             "no line with <!-- reproduction-score -->")


@pytest.mark.parametrize("command", ["check", "report"])
@pytest.mark.parametrize("name", ["meta.json", "checks.json", "flows.parquet"])
def test_an_output_inside_a_run_it_reads_is_refused(tmp_path, command, name):
    run = _claims_run(tmp_path)
    _refused(tmp_path, [command, str(run), "-o", str(run / name)], "inside the run directory")


@pytest.mark.parametrize("command", ["check", "report"])
def test_an_output_that_is_a_link_a_fifo_a_device_or_under_a_file_is_refused(tmp_path, command):
    run = _claims_run(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "link.json").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo.json")
    for output, message in ((tmp_path / "link.json", "is a symbolic link"), (tmp_path / "fifo.json", "is a FIFO"),
                            (Path("/dev/full"), "is a device"), (victim / "x.json", "is not a directory")):
        _refused(tmp_path, [command, str(run), "-o", str(output)], message)
    assert victim.read_text() == "precious"


def test_check_refuses_the_experiments_file_as_its_page(tmp_path):
    run = _claims_run(tmp_path)
    (tmp_path / "exp.yaml").write_text(EXPERIMENTS)
    _refused(tmp_path, ["check", str(run), "-o", str(tmp_path / "c.json"), "-f", str(tmp_path / "exp.yaml"),
                        "--markdown", str(tmp_path / "exp.yaml")], "is also an input")


def test_figure_folders_are_never_a_path():
    from cctest.report.export import _slug

    assert [_slug(x) for x in ("..", ".", "../../etc", ".hidden", "a..b")] == ["figure", "figure", "etc", "hidden",
                                                                                "a..b"]
