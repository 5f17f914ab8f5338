"""bench/cost_page.py, the cost benchmark's generated page, on small made-up rows and run records:
a run adds its rows, the same run again replaces them, and a page that cannot be written is
refused in one line with exit code 2 before anything is written or run. No guest boots."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from cctest.base.errors import BAD_INPUT, BadInput
from tests import REPO

# bench/ is not a package: loaded by its path, so that its other scripts never shadow a module
_spec = importlib.util.spec_from_file_location("cost_page", REPO / "bench" / "cost_page.py")
assert _spec is not None and _spec.loader is not None
cost_page = importlib.util.module_from_spec(_spec)
sys.modules["cost_page"] = cost_page  # its dataclass looks its module up there
_spec.loader.exec_module(cost_page)


def _figures(engine: str, flows: int, ratio: float, against: float | None) -> dict:
    return {"engine": engine, "flows": flows, "rate_mbps": 100.0, "ratio": ratio, "against": against,
            "steady_goodput": 0.991, "boot_topology_s": 4.7}


def _rows(date: str, commit: str = "410b87b0c733", ratio: float = 1.38) -> list[dict[str, str]]:
    context = cost_page.RunContext(date, commit, host="2 × AMD EPYC", load="1.2 → 1.6")
    return [cost_page.page_row(context, _figures("uml-6.1", 1, ratio, 1.0), "uml-6.1"),
            cost_page.page_row(context, _figures("uml-7.2", 1, 0.91, 0.66), "uml-6.1")]


def _table_lines(page) -> list[str]:
    return [line for line in page.read_text().splitlines() if line.startswith("| 20")]


def test_a_run_adds_its_rows_under_the_generated_marker(tmp_path):
    page = tmp_path / "bench.md"
    cost_page.write_page(page, _rows("2026-11-29 14:03"), "docs/bench.md")
    text = page.read_text()
    assert text.startswith(cost_page.MARKER_START) and "--page docs/bench.md" in text.splitlines()[0]
    lines = _table_lines(page)
    assert lines == [
        "| 2026-11-29 14:03 | 410b87b0c733 | 2 × AMD EPYC | 1.2 → 1.6 | uml-6.1 | 1 | 100 | 1.38 | base "
        "| 99.1 % | 4.7 |",
        "| 2026-11-29 14:03 | 410b87b0c733 | 2 × AMD EPYC | 1.2 → 1.6 | uml-7.2 | 1 | 100 | 0.91 | 0.66 × uml-6.1 "
        "| 99.1 % | 4.7 |",
    ]


def test_a_later_run_goes_first_and_keeps_the_earlier_rows(tmp_path):
    page = tmp_path / "bench.md"
    cost_page.write_page(page, _rows("2026-11-29 14:03"))
    cost_page.write_page(page, _rows("2026-12-01 09:00", commit="abcdef012345 (dirty)", ratio=1.52))
    lines = _table_lines(page)
    assert len(lines) == 4
    assert lines[0].startswith("| 2026-12-01 09:00 | abcdef012345 (dirty) |") and "| 1.52 |" in lines[0]
    assert lines[2].startswith("| 2026-11-29 14:03 | 410b87b0c733 |") and "| 1.38 |" in lines[2]


def test_the_same_run_again_replaces_its_rows_instead_of_adding_them(tmp_path):
    page = tmp_path / "bench.md"
    cost_page.write_page(page, _rows("2026-11-29 14:03"))
    cost_page.write_page(page, _rows("2026-12-01 09:00"))
    cost_page.write_page(page, _rows("2026-11-29 14:03", ratio=1.40))  # --reuse after a fix to a figure
    lines = _table_lines(page)
    assert len(lines) == 4
    assert [line.split(" | ")[0] for line in lines] == ["| 2026-12-01 09:00"] * 2 + ["| 2026-11-29 14:03"] * 2
    assert "| 1.40 |" in lines[2] and not any("| 1.38 |" in line for line in lines[2:])


def test_rows_of_a_page_with_other_columns_keep_the_cells_still_named(tmp_path):
    page = tmp_path / "bench.md"
    page.write_text(f"{cost_page.MARKER_START} cost --page bench.md -->\n\n"
                    "| date (UTC) | commit | engine | flows | Mbit/s | host s per guest s |\n"
                    "|---|---|---|---|---|---|\n"
                    "| 2026-11-01 10:00 | 0123456789ab | uml | 1 | 20 | 0.41 |\n")
    cost_page.write_page(page, _rows("2026-11-29 14:03"))
    oldest = _table_lines(page)[-1]
    assert oldest == "| 2026-11-01 10:00 | 0123456789ab | - | - | uml | 1 | 20 | 0.41 | - | - | - |"


@pytest.mark.parametrize("where", ["missing-dir/bench.md", "a-file/bench.md", "a-dir", "hand-written.md"])
def test_a_page_that_cannot_be_written_is_refused_naming_it(tmp_path, where):
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "hand-written.md").write_text("# Notes\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(BadInput, match=re.escape(f"--page {tmp_path / where}")) as refused:
        cost_page.write_page(tmp_path / where, _rows("2026-11-29 14:03"))
    assert refused.value.exit_code == BAD_INPUT
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "hand-written.md").read_text() == "# Notes\n"


def test_the_benchmark_refuses_an_unwritable_page_in_one_line_before_running(tmp_path):
    """--reuse on an empty --out: nothing could run anyway, and the refusal comes first."""
    page = tmp_path / "missing-dir" / "bench.md"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "engines.py"), "cost", "--engines", "uml-6.1",
                           "--out", str(tmp_path / "out"), "--reuse", "--page", str(page)],
                          capture_output=True, text=True)
    assert done.returncode == BAD_INPUT
    assert done.stderr.splitlines() == [f"bench/engines.py: --page {page}: the directory {page.parent} does not exist"]
    assert done.stdout == "" and not (tmp_path / "missing-dir").exists() and not (tmp_path / "out").exists()


def test_a_run_directory_gives_the_date_commit_host_and_load(tmp_path):
    metas = [{"start_time": "2026-11-29T15:07:26.257+01:00", "cctest": {"git_commit": "410b87b0c733bb03-dirty"}},
             {"start_time": "2026-11-29T14:09:00+00:00", "cctest": {"git_commit": "410b87b0c733bb03-dirty"}}]
    bare = cost_page.context_of(tmp_path, metas)
    assert bare == cost_page.RunContext("2026-11-29 14:07", "410b87b0c733 (dirty)", "not recorded", "not recorded")
    (tmp_path / cost_page.HOST_RECORD).write_text(json.dumps(
        {"cpus": 2, "cpu_model": "AMD EPYC 7B13", "load_start": 1.23, "load_end": 1.61}))
    recorded = cost_page.context_of(tmp_path, metas)
    assert (recorded.host, recorded.load) == ("2 × AMD EPYC 7B13", "1.2 → 1.6")
    assert cost_page.short_commit(None) == "not recorded"


def test_the_benchmark_records_the_host_beside_the_runs_it_makes(tmp_path):
    cost_page.save_host_record(tmp_path, cost_page.host_now())
    context = cost_page.context_of(tmp_path, [{"start_time": "2026-11-29T14:03:00+00:00", "cctest": {}}])
    assert context.host.startswith(f"{os.cpu_count()} × ") and " → " in context.load
    assert context.commit == "not recorded"
