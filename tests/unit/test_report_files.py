"""The report's files (docs/run-directory.md, "The report's files") against what `cctest report`
writes: named after the page, and every summary.csv column documented."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import yaml
from click.testing import CliRunner

from cctest.analysis.summary import FLOW_METRICS
from cctest.cli.report import report_command
from cctest.model.metric_table import CC_METRICS, RUN_METRICS
from tests import REPO

DOC = (REPO / "docs" / "run-directory.md").read_text()
FIXTURES = REPO / "tests" / "fixtures" / "runs"


def doc_columns(doc: str = DOC) -> set[str]:
    section = doc.split("### NAME.summary.csv", 1)[1].split("###", 1)[0]
    return {name for row in re.findall(r"^\| (`.*?) \|", section, re.M) for name in re.findall(r"`([^`]+)`", row)}


def test_two_reports_in_one_directory_keep_their_own_files(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES, runs)
    demo = next(runs.glob("demo-*"))
    resolved = yaml.safe_load((demo / "scenario.yaml").read_text())
    resolved["expect"] = [{"claim": "share(cubic) > 0.01"}]
    (demo / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    out = tmp_path / "out"
    for name, paths in (("a", [demo]), ("b", [runs])):
        res = CliRunner().invoke(report_command, [*map(str, paths), "-o", str(out / f"{name}.html"),
                                                  "--recorded-claims"])
        assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "a.claims.json", "a.html", "a.summary.csv", "a.summary.json",
        "b.claims.json", "b.html", "b.summary.csv", "b.summary.json"]
    assert len(json.loads((out / "a.summary.json").read_text())["runs"]) == 1
    assert len(json.loads((out / "b.summary.json").read_text())["runs"]) == len(list(FIXTURES.glob("*-r0")))
    csv = pd.read_csv(out / "b.summary.csv")
    documented = doc_columns()
    written = {c for c in csv.columns if not c.startswith("matrix.")}
    assert "matrix.<key>" in documented and any(c.startswith("matrix.") for c in csv.columns)
    # what the doc names is written, and what the report's own lists write is named
    assert documented - {"matrix.<key>"} <= set(csv.columns), documented - set(csv.columns)
    ours = {"level", "run_id", "clock", "icount_shift", "git_commit", "git_dirty", "cctest_version", "seed", "aqm",
            "ecn", "rate_schedule", "outages", "tags", *(m.column for m in (*RUN_METRICS, *CC_METRICS)),
            *FLOW_METRICS}
    assert ours & written <= documented, (ours & written) - documented
    runs_ = csv[csv["level"] == "run"].set_index("run_id")
    wall = runs_[runs_["clock"] == "wall"]
    assert len(wall) == 1 and wall.index[0].endswith("ratembps-20.0-r0")  # the recorded wall-clock run
    assert runs_["git_dirty"].astype(str).isin(["True", "False"]).all()
    assert set(runs_["aqm"]) == {"fifo"}


def test_doc_column_parser_sees_an_edit():
    edited = DOC.replace("| `seed` | run |", "| `the_seed` | run |")
    assert "seed" in doc_columns() and "seed" not in doc_columns(edited)
