"""Compact run records (cctest/model/compact.py): `cctest record` writes one per run, and `check`, `report`,
the reproduction page and `validate` read a tree of them as they read run directories, to the
same verdicts. The committed page regenerates from records/ line by line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.cli.main import main
from tests import REPO
from tests.unit.test_claims import PROTOCOL_EXPERIMENTS, protocol_runs

# The protocol scenario with a steady window moved to a whole second (the record keeps those) and
# to a fraction of one (it does not: the claim says what it lacks).
EXPERIMENTS = PROTOCOL_EXPERIMENTS + """
      - claim: "jain_steady > 0.5"
        steady_from_s: 3
      - claim: "steady_share(bbr) > 0.3"
        steady_from_s: 4
"""


def _record(src: Path, dest: Path) -> None:
    result = CliRunner().invoke(main, ["record", str(src), str(dest)])
    assert result.exit_code == 0, result.output
    assert f"into {dest}" in result.output


def _page(root: Path, inputs: str, monkeypatch) -> tuple[str, dict]:
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["check", inputs, "-f", "e.yaml", "--markdown", "page.md", "-o", "c.json",
                                       "--no-fail"])
    assert result.exit_code == 0, result.output
    return (root / "page.md").read_text(), json.loads((root / "c.json").read_text())


def test_the_page_and_the_verdicts_are_the_same_from_run_directories_and_from_their_records(tmp_path, monkeypatch):
    full, compact = tmp_path / "full", tmp_path / "compact"
    for root in (full, compact):
        root.mkdir()
        (root / "e.yaml").write_text(EXPERIMENTS)
    protocol_runs(full / "runs" / "paper-001")
    _record(full / "runs", compact / "runs")
    records = sorted(p.relative_to(compact) for p in compact.rglob("record.json"))
    assert records == sorted(p.parent.relative_to(full) / "record.json" for p in full.rglob("meta.json"))
    assert all((compact / p).stat().st_size < 20_000 for p in records)
    page, verdicts = _page(full, "runs", monkeypatch)
    page_r, verdicts_r = _page(compact, "runs", monkeypatch)
    assert page_r == page
    assert verdicts_r == verdicts
    steady = [c for c in verdicts["claims"] if c["claim"] in ("jain_steady > 0.5", "steady_share(bbr) > 0.3")]
    assert len(steady) == 2 and all(c["values"] for c in steady)  # judged from the recorded windows


def test_a_steady_window_from_a_fraction_of_a_second_is_named_as_what_a_record_lacks(tmp_path, monkeypatch):
    protocol_runs(tmp_path / "runs")
    _record(tmp_path / "runs", tmp_path / "records")
    (tmp_path / "e.yaml").write_text(PROTOCOL_EXPERIMENTS + '      - claim: "jain_steady > 0.5"\n'
                                     "        steady_from_s: 2.5\n")
    out = tmp_path / "c.json"
    CliRunner().invoke(main, ["check", str(tmp_path / "records"), "-f", str(tmp_path / "e.yaml"), "-o", str(out)])
    [claim] = [c for c in json.loads(out.read_text())["results"] if c["claim"] == "jain_steady > 0.5"]
    assert "a compact record keeps the windows from whole seconds only" in claim["reason"]


def test_a_report_of_records_has_its_tables_and_claims_and_says_the_figures_need_the_run_directories(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(PROTOCOL_EXPERIMENTS)
    protocol_runs(tmp_path / "runs")
    _record(tmp_path / "runs", tmp_path / "records")
    full, compact = tmp_path / "full.html", tmp_path / "compact.html"
    for inputs, html in ((tmp_path / "runs", full), (tmp_path / "records", compact)):
        result = CliRunner().invoke(main, ["report", str(inputs), "-f", str(f), "-o", str(html), "--no-fail"])
        assert result.exit_code == 0, result.output
    assert "3 compact record(s) (record.json)" in result.output
    assert "the figures of time series need the full run directories" in compact.read_text()

    def claims(html: Path) -> dict:
        return json.loads(html.with_suffix(".claims.json").read_text())

    def runs(html: Path) -> list[dict]:
        rows = json.loads(html.with_suffix(".summary.json").read_text())["runs"]
        return [{k: v for k, v in row.items() if k != "path"} for row in rows]

    assert claims(compact) == claims(full)
    assert runs(compact) == runs(full)
    moved = CliRunner().invoke(main, ["report", str(tmp_path / "records"), "-f", str(f), "-o", str(compact),
                                      "--skip-s", "3"])
    assert moved.exit_code == 2 and "--skip-s 3 needs the full run directory" in moved.output


def test_validate_reads_the_same_rows_from_records(tmp_path):
    from cctest.validation import runs
    from tests.unit.test_validation import C1, TABLE, grid

    grid(tmp_path / "runs")
    _record(tmp_path / "runs", tmp_path / "records")
    full, compact = runs.read([tmp_path / "runs"], set(TABLE)), runs.read([tmp_path / "records"], set(TABLE))
    assert len(full.rows) == 6 and all(row.cell == C1 and row.goodput_mbps > 0 for row in full.rows)
    assert sorted(map(repr, compact.rows)) == sorted(map(repr, full.rows))


def test_record_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path):
    protocol_runs(tmp_path / "runs")
    run = next((tmp_path / "runs").rglob("meta.json")).parent
    _record(tmp_path / "runs", tmp_path / "records")
    cases = [([str(tmp_path / "none"), str(tmp_path / "out")], "no such file or directory"),
             ([str(tmp_path / "runs"), str(run)], "inside the run directory"),
             ([str(tmp_path / "records"), str(tmp_path / "out")], "a compact record, not a run directory")]
    for args, said in cases:
        result = CliRunner().invoke(main, ["record", *args])
        assert result.exit_code == 2, result.output
        assert said in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert not (tmp_path / "out").exists() and not (run / "record.json").exists()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """The records of the protocol scenario's three runs, made once."""
    root = tmp_path_factory.mktemp("recorded")
    protocol_runs(root / "runs")
    _record(root / "runs", root / "records")
    return root / "records"


@pytest.mark.parametrize("damage, said", [
    (lambda p: p.write_text("[]"), "not a JSON object"),
    (lambda p: p.write_text("{"), "not JSON"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "record_version": 9})), "record_version 9"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "extra": 1})), "extra: not a field"),
    (lambda p: p.write_text(p.read_text().replace('"jain":', '"jain":[],"x":', 1)), "must be a number, text or null"),
    (lambda p: (p.unlink(), p.symlink_to("/etc/passwd")), "symbolic link"),
    (lambda p: (p.unlink(), os.mkfifo(p)), "FIFO"),
    (lambda p: p.write_text(" " * (1 << 20) + "{}"), "bytes; a run record is at most"),
])
def test_a_damaged_record_is_bad_input_naming_the_file(tmp_path, recorded, damage, said):
    shutil.copytree(recorded, tmp_path / "records")
    target = sorted((tmp_path / "records").rglob("record.json"))[0]
    damage(target)
    result = CliRunner().invoke(main, ["check", str(target.parent), "-f", str(_experiments(tmp_path)),
                                       "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 2, result.output
    assert str(target) in result.output and said in result.output, result.output


def _experiments(tmp_path: Path) -> Path:
    f = tmp_path / "e.yaml"
    f.write_text(PROTOCOL_EXPERIMENTS)
    return f


def test_the_committed_page_regenerates_from_records_line_by_line(tmp_path, monkeypatch):
    """docs/reproduction.md and README's score line, re-judged from the compact records in records/
    with experiments.yaml and its suites, by the command the page names: the same, line by line."""
    (tmp_path / "records").symlink_to(REPO / "records")
    shutil.copy(REPO / "experiments.yaml", tmp_path)
    shutil.copytree(REPO / "suites", tmp_path / "suites")
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "records", "--markdown", "docs/reproduction.md", "--readme",
                                       "README.md", "-o", "claims.json", "--no-fail"])
    assert result.exit_code == 0, result.output
    committed = (REPO / "docs" / "reproduction.md").read_text().splitlines()
    generated = (tmp_path / "docs" / "reproduction.md").read_text().splitlines()
    for k, (want, got) in enumerate(zip(committed, generated, strict=False), 1):
        assert got == want, f"docs/reproduction.md line {k} differs"
    assert len(generated) == len(committed)
    assert (tmp_path / "README.md").read_text() == (REPO / "README.md").read_text()
