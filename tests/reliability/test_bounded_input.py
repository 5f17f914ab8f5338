"""Reading is bounded: alias bombs, deep nesting, huge files and special files
(FIFO, /dev/zero, a directory) are refused in one line, exit 2, before any value is built, from
experiments.yaml (`list`, `run --dry-run`) and from a run directory's scenario.yaml and meta.json
(`check`, `report`). The work bound: the refusal comes from libyaml's event stream (at most one
pass over the text, no Python object per expanded value); the test also holds each refusal to
under 1 s of CPU and 200 MB of Python allocations (tracemalloc)."""

from __future__ import annotations

import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from cctest.analysis.run_claims import UnjudgeableClaims, expectations_of_runs
from cctest.base import safeload
from cctest.cli.main import main
from cctest.model.scenario import MAX_FILE_BYTES, load_experiments
from tests import REPO
from tests.unit.test_scenario import GOOD

FIXTURES = REPO / "tests" / "fixtures" / "runs"
RECORDED = FIXTURES / "cubic-bbr-shallow-20261121-231855-base-r0"
MEMORY_BOUND = 200 << 20


def bomb(levels: int, fanout: int, where: str) -> str:
    """A billion-laughs file: level k is a list of `fanout` aliases to level k-1."""
    lines = ["defaults:", "  description: &l0 lol"]
    for k in range(1, levels + 1):
        lines.append(f"  l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * fanout)}]")
    top = f"*l{levels}"
    body = {"scenarios": f"scenarios: {{one: {top}}}",
            "merge": f"scenarios:\n  one:\n    <<: {{deep: {top}}}"}[where]
    return "\n".join(lines) + "\n" + body + "\n"


def deep(depth: int, style: str) -> str:
    if style == "flow lists":
        return "scenarios: " + "[" * depth + "]" * depth + "\n"
    if style == "flow maps":
        return "scenarios: " + "{a: " * depth + "1" + "}" * depth + "\n"
    return "scenarios:\n" + "".join("  " * (k + 1) + "a:\n" for k in range(depth)) + "  " * (depth + 1) + "b: 1\n"


def refused_quickly(call) -> str:
    """Run `call` (which must raise a one-line Refused/BadInput); return the line. Asserts the CPU
    and memory bounds."""
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(Exception) as caught:
            call()
        cpu = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert getattr(caught.value, "exit_code", None) == 2, repr(caught.value)
    line = str(caught.value)
    assert "\n" not in line and len(line) < 400, line
    assert cpu < 1.0, f"{cpu:.2f} s CPU: {line}"
    assert peak < MEMORY_BOUND, f"{peak / 1e6:.0f} MB: {line}"
    return line


def never_built(monkeypatch):
    """Fail if a hostile document gets as far as the constructor (the refusal must come first)."""
    def construct(self, node):
        raise AssertionError("a hostile document reached the constructor")
    monkeypatch.setattr(safeload.StrictLoader, "construct_document", construct)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(levels=st.integers(3, 12), fanout=st.integers(3, 30), where=st.sampled_from(["scenarios", "merge"]))
def test_property_alias_bombs_are_refused_before_anything_is_built(tmp_path, monkeypatch, levels, fanout, where):
    if fanout ** levels <= safeload.MAX_VALUES:
        return  # small enough to be a real file; not a bomb
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(levels, fanout, where))
    with monkeypatch.context() as m:
        never_built(m)
        line = refused_quickly(lambda: load_experiments(path))
    assert str(path) in line and ("values (aliases expanded)" in line or "nested" in line), line


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(safeload.MAX_NESTING + 1, 20_000),
       style=st.sampled_from(["flow lists", "flow maps", "block maps"]))
def test_property_deep_nesting_is_refused_before_anything_is_built(tmp_path, monkeypatch, depth, style):
    text = deep(depth, style)
    if len(text.encode()) > MAX_FILE_BYTES:
        depth = 400  # a block map that deep is over the size bound: the size refusal is tested below
        text = deep(depth, style)
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with monkeypatch.context() as m:
        never_built(m)
        line = refused_quickly(lambda: load_experiments(path))
    assert "nested more than 32 levels" in line, line


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.integers(1, 1 << 40), sparse=st.booleans())
def test_property_huge_files_are_refused_by_their_size_without_being_read(tmp_path, extra, sparse):
    path = tmp_path / "huge.yaml"
    size = MAX_FILE_BYTES + (extra if sparse else min(extra, 1 << 22))
    with open(path, "wb") as f:
        if sparse:
            f.truncate(size)  # a hole: reading it would allocate `size` bytes
        else:
            f.write(b"#" * size)
    line = refused_quickly(lambda: load_experiments(path))
    assert f"{size} bytes" in line and f"at most {MAX_FILE_BYTES}" in line, line


def special_file(kind: str, tmp_path: Path) -> Path:
    if kind == "fifo":
        path = tmp_path / "fifo.yaml"
        os.mkfifo(path)
        return path
    if kind == "directory":
        (tmp_path / "dir.yaml").mkdir()
        return tmp_path / "dir.yaml"
    return Path({"zero": "/dev/zero", "null": "/dev/null", "urandom": "/dev/urandom"}[kind])


@pytest.mark.parametrize("kind", ["fifo", "zero", "null", "urandom", "directory"])
def test_special_files_are_refused_without_blocking(tmp_path, kind):
    path = special_file(kind, tmp_path)
    line = refused_quickly(lambda: load_experiments(path))
    assert "not a regular file" in line, line


@pytest.mark.parametrize("kind", ["fifo", "zero", "directory"])
def test_cli_refuses_special_files_in_one_line_exit_2(tmp_path, kind):
    path = special_file(kind, tmp_path)
    # click's own Path check says "is a directory" for that one; both are one line, exit 2
    for args in (["list", "-f", str(path)], ["run", "one", "-f", str(path), "--dry-run"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert len(result.stderr.strip().splitlines()) == 1 and str(path) in result.stderr


def test_a_symlink_to_a_regular_file_is_read(tmp_path):
    (tmp_path / "real.yaml").write_text(GOOD)
    (tmp_path / "link.yaml").symlink_to(tmp_path / "real.yaml")
    assert "one" in load_experiments(tmp_path / "link.yaml").scenarios


# --- a run directory: the same loader, the same bounds -----------------------------------------

def run_dir_with(tmp_path: Path, scenario_yaml: str | None = None, special: str | None = None,
                 meta_special: str | None = None) -> Path:
    run = tmp_path / "runs" / "r"
    shutil.copytree(RECORDED, run)
    target = run / "scenario.yaml"
    if scenario_yaml is not None:
        target.write_text(scenario_yaml)
    if special == "fifo":
        target.unlink()
        os.mkfifo(target)
    if meta_special == "fifo":
        (run / "meta.json").unlink()
        os.mkfifo(run / "meta.json")
    return tmp_path / "runs"


@pytest.mark.parametrize("hostile", ["bomb", "deep", "fifo"])
def test_a_run_directorys_scenario_yaml_is_read_with_the_same_bounds(tmp_path, hostile):
    from cctest.analysis.load import load_runs

    text = {"bomb": bomb(9, 9, "scenarios"), "deep": deep(5000, "flow lists"), "fifo": None}[hostile]
    runs_dir = run_dir_with(tmp_path, text, special="fifo" if hostile == "fifo" else None)
    runs = load_runs([runs_dir])
    started = time.process_time()
    with pytest.raises(UnjudgeableClaims) as refused:  # the claims it may carry fail the gate
        expectations_of_runs(runs)
    assert time.process_time() - started < 1.0
    message = str(refused.value)
    assert "scenario.yaml" in message and message.endswith("a claim that cannot be judged fails the gate")
    assert {"bomb": "aliases expanded", "deep": "nested", "fifo": "not a regular file"}[hostile] in message


@pytest.mark.parametrize("command", ["check", "report"])
def test_check_and_report_on_a_hostile_run_directory_answer_at_once(tmp_path, command):
    runs_dir = run_dir_with(tmp_path, deep(5000, "flow lists"))
    started = time.perf_counter()
    result = CliRunner().invoke(main, [command, str(runs_dir), "--recorded-claims", "-o", str(tmp_path / "out.x")])
    assert time.perf_counter() - started < 60  # a report takes seconds; the hang was forever
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "nested more than 32 levels" in result.stderr and "Traceback" not in result.output


def test_a_fifo_as_meta_json_is_one_line_exit_2(tmp_path):
    runs_dir = run_dir_with(tmp_path, meta_special="fifo")
    result = CliRunner().invoke(main, ["check", str(runs_dir), "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "not a regular file" in result.stderr


def test_yaml_number_forms_that_read_as_something_else_are_refused(tmp_path):
    for text, form in (("020", "octal"), ("1:30", "sexagesimal"), ("1:30.5", "sexagesimal")):
        with pytest.raises(safeload.Refused, match=form):
            safeload.load_yaml(f"x: {text}\n")
    assert safeload.load_yaml("x: [0, 20, 0x10, 0.5, '020']\n") == {"x": [0, 20, 16, 0.5, "020"]}
    assert yaml.safe_load("x: 020\n") == {"x": 16}  # what PyYAML alone would have run


# --- every message a user sees is one line a terminal shows as written --------------------

HOSTILE_CHARS = "\x1b[2J\x1b[32mall good\x0b\x0c\x85\u2028\u2029\u202e\u2066\x9b\x07\x00\x7f\r\n"


def assert_shown_as_written(text: str) -> None:
    for char in HOSTILE_CHARS.replace("\n", ""):
        if not " " <= char <= "~":
            assert char not in text, (repr(char), text)
    assert text.count("\n") <= 1 and text.endswith("\n") or "\n" not in text


def test_printable_escapes_every_control_format_and_separator_character():
    from cctest.base.errors import printable

    assert (printable("a\x1bb\x0bc\x85d\u2028e\u2029f\u202eg\th\n")
            == "a\\x1bb\\x0bc\\x85d\\u2028e\\u2029f\\u202eg\\th\\n")
    assert printable("café, 日本, ±, —") == "café, 日本, ±, —"  # what shows as a glyph stays
    assert len(printable("x" * 100_000)) == 480 and " … " in printable("x" * 100_000)


def test_a_hostile_key_in_experiments_yaml_is_one_escaped_line(tmp_path):
    path = tmp_path / "exp.yaml"
    escaped = HOSTILE_CHARS.replace("\x00", "").replace("\r\n", "")  # YAML refuses NUL and line breaks in keys
    key = "".join(f"\\u{ord(c):04x}" for c in escaped)
    path.write_text(GOOD + f"    \"{key}{'k' * 600}\": 1\n")
    for args in (["list", "-f", str(path)], ["run", "one", "-f", str(path), "--dry-run"]):
        result = CliRunner().invoke(main, args, color=True)  # color: click strips nothing
        assert result.exit_code == 2, result.output
        assert_shown_as_written(result.stderr)
        assert len(result.stderr.splitlines()) == 1 and len(result.stderr) < 500
        assert "\\x1b[2J" in result.stderr and "unknown key" in result.stderr


def test_check_escapes_the_scenario_name_it_reads_from_meta_json(tmp_path):
    import json

    runs_dir = run_dir_with(tmp_path)
    run = runs_dir / "r"
    meta = json.loads((run / "meta.json").read_text())
    meta["scenario"] = "evil" + HOSTILE_CHARS
    (run / "meta.json").write_text(json.dumps(meta))
    resolved = yaml.safe_load((run / "scenario.yaml").read_text())
    resolved["expect"] = [{"claim": "share(bbr) > 0.1"}]
    (run / "scenario.yaml").write_text(yaml.safe_dump(resolved))
    result = CliRunner().invoke(main, ["check", str(runs_dir), "--recorded-claims", "-o", str(tmp_path / "c.json")],
                                color=True)
    assert "evil\\x1b[2J" in result.stdout, result.output
    for line in result.output.splitlines(keepends=True):
        assert_shown_as_written(line)


def test_ingest_never_blocks_on_a_fifo_in_a_run_directory(tmp_path):
    """`cctest ingest` reads a run directory that may come from anywhere: a FIFO as a raw capture or
    as meta.json is one line, exit 2, and no table is remade without it (each blocked forever before)."""
    from cctest.analysis.ingest import ingest_run

    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "sockdiag", run)
    (run / "raw" / "ss.jsonl").unlink()
    os.mkfifo(run / "raw" / "ss.jsonl")
    with pytest.raises(safeload.Refused, match=r"raw/ss\.jsonl: is a FIFO, not a regular file"):
        ingest_run(run)
    assert not list(run.glob("*.parquet"))
    (run / "meta.json").unlink()
    os.mkfifo(run / "meta.json")
    with pytest.raises(safeload.Refused, match=r"meta\.json: is a FIFO, not a regular file"):
        ingest_run(run)
    result = CliRunner().invoke(main, ["ingest", str(run)])
    assert result.exit_code == 2 and "a FIFO" in result.stderr and "Traceback" not in result.output


def test_a_fifo_as_the_kernel_is_one_line_exit_2(tmp_path):
    """`--kernel FIFO` once waited for a writer forever."""
    (tmp_path / "exp.yaml").write_text(GOOD)
    os.mkfifo(tmp_path / "vmlinuz-6.1.0-56-amd64")
    result = CliRunner().invoke(main, ["run", "one", "-f", str(tmp_path / "exp.yaml"), "--vm", "--kernel",
                                       str(tmp_path / "vmlinuz-6.1.0-56-amd64"), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and "is a fifo, not a regular file" in result.stderr


def test_a_run_directorys_scenario_yaml_is_read_bounded_for_its_tags(tmp_path):
    """The report's provenance (scenario_tags) reads a run directory's scenario.yaml with the same
    bounded loader as experiments.yaml: an alias bomb there gives no tags, at once."""
    from cctest.analysis.provenance import scenario_tags

    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
    (tmp_path / "scenario.yaml").write_text("tags: [paper-000]\n" + bomb)
    assert scenario_tags(tmp_path) == []
    (tmp_path / "scenario.yaml").write_text("tags: [paper-000]\n")
    assert scenario_tags(tmp_path) == ["paper-000"]


# --- a run directory shared by others: nothing outside it is read, only its regular files ---------

SECRET = "secret-token-0123456789"


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"tags: [{SECRET}]\n")
    return secret


def _all_output(tmp_path: Path, result) -> str:
    """What a command printed and every file it wrote under tmp_path/out."""
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file())
    return result.output + written


@pytest.mark.parametrize("command", ["report", "check"])
def test_a_scenario_yaml_linked_outside_the_run_is_never_read(tmp_path, command):
    runs_dir = run_dir_with(tmp_path)
    (runs_dir / "r" / "scenario.yaml").unlink()
    (runs_dir / "r" / "scenario.yaml").symlink_to(_secret(tmp_path))
    (tmp_path / "out").mkdir()
    result = CliRunner().invoke(main, [command, str(runs_dir), "--recorded-claims", "-o", str(tmp_path / "out" / "x")])
    assert result.exit_code == 2, result.output  # the claims it may carry cannot be judged
    assert "scenario.yaml: is a symbolic link" in result.stderr and "Traceback" not in result.output
    assert SECRET not in _all_output(tmp_path, result)
    assert not list((tmp_path / "out").iterdir())  # nothing written


def test_a_meta_json_linked_outside_the_run_is_refused(tmp_path):
    runs_dir = run_dir_with(tmp_path)
    meta = runs_dir / "r" / "meta.json"
    outside = tmp_path / "outside-meta.json"
    outside.write_text(meta.read_text().replace('"scenario": "', f'"scenario": "{SECRET}'))
    meta.unlink()
    meta.symlink_to(outside)
    result = CliRunner().invoke(main, ["check", str(runs_dir), "--recorded-claims", "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.output
    assert "meta.json: unreadable (is a symbolic link" in result.stderr and SECRET not in result.output
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("name", ["checks.json", "throughput.parquet", "ss.parquet"])
def test_a_linked_or_special_file_in_a_run_is_a_note_never_read(tmp_path, name):
    """A link to /dev/zero ran report out of memory; a FIFO hung it: both are named and skipped."""
    runs_dir = run_dir_with(tmp_path)
    target = runs_dir / "r" / name
    target.unlink()
    target.symlink_to("/dev/zero")
    from cctest.analysis.load import load_run

    started = time.perf_counter()
    run = load_run(runs_dir / "r")
    assert any(name in note and "is a symbolic link" in note for note in run.notes), run.notes
    target.unlink()
    os.mkfifo(target)
    run = load_run(runs_dir / "r")
    assert any(name in note and "is a FIFO" in note for note in run.notes), run.notes
    assert time.perf_counter() - started < 5


def test_a_raw_folder_linked_outside_the_run_is_refused_by_ingest(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "sockdiag", run)
    elsewhere = tmp_path / "elsewhere"
    (run / "raw").rename(elsewhere)
    (run / "raw").symlink_to(elsewhere)
    result = CliRunner().invoke(main, ["ingest", str(run)])
    assert result.exit_code == 2, result.output
    assert "raw/" in result.stderr and "symbolic link" in result.stderr and "Traceback" not in result.output
    assert not list(run.glob("*.parquet")) and not (run / "checks.json").exists()


def test_a_parquet_footer_claiming_millions_of_rows_is_refused_before_loading(tmp_path):
    """15 M rows of one repeated value fit a file of a few hundred kB and decode to gigabytes."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cctest.model import runfiles

    column = pa.array(np.zeros(15_000_000, dtype=np.int8))
    pq.write_table(pa.table({"flow": column, "t_s": column}), tmp_path / "ss.parquet")
    assert (tmp_path / "ss.parquet").stat().st_size < 1 << 20
    tracemalloc.start()
    with pytest.raises(safeload.Refused, match="claims 15000000 rows x 2 columns"):
        runfiles.read_table(tmp_path, "ss")
    assert tracemalloc.get_traced_memory()[1] < MEMORY_BOUND
    tracemalloc.stop()
    assert len(runfiles.read_table(RECORDED, "ss")) > 0  # a real table is read


# --- scale: finding runs is linear in their number, a deep tree is walked without recursion -------

def test_fifteen_hundred_run_directories_are_found_in_seconds(tmp_path):
    from cctest.analysis.load import load_runs

    for i in range(1500):
        run = tmp_path / f"s{i // 100}" / f"r{i}"
        run.mkdir(parents=True)
        (run / "meta.json").write_text("{}")
    started = time.perf_counter()
    assert len(load_runs([tmp_path], [])) == 1500
    assert time.perf_counter() - started < 5  # quadratic: 19 s


def test_a_tree_fifteen_hundred_deep_is_walked(tmp_path):
    from cctest.analysis.load import find_run_dirs

    folders = [tmp_path / "a"]
    for _ in range(1500):  # os.makedirs recurses too
        os.mkdir(folders[-1])
        folders.append(folders[-1] / "a")
    run = folders[-2]
    (run / "meta.json").write_text("{}")
    try:
        assert find_run_dirs(tmp_path) == [run]
    finally:  # pytest's own clean-up (shutil.rmtree) recurses: the tree goes from its bottom up
        (run / "meta.json").unlink()
        for folder in reversed(folders[:-1]):
            folder.rmdir()


def test_a_run_still_in_a_guests_home_is_not_found(tmp_path):
    """While a UML guest runs, its run directory sits in its home under --out (.uml-<k>/out/...):
    judging --out then sees only the runs that have ended."""
    from cctest.analysis.load import find_run_dirs

    ended = tmp_path / "s" / "run-1"
    ended.mkdir(parents=True)
    (ended / "meta.json").write_text("{}")
    running = tmp_path / ".uml-3" / "out" / "s" / "run-2"
    running.mkdir(parents=True)
    (running / "meta.json").write_text("{}")
    assert find_run_dirs(tmp_path) == [ended]
