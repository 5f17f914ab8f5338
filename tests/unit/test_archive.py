"""The archive of full run directories (cctest/model/archive.py): `cctest archive` packs each run into
the same bytes every time, `cctest fetch` brings them back through file:// and http:// byte for byte,
and a corrupted archive, a corrupted manifest or a run already there that differs is refused in one
line, exit 2, with nothing written."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.analysis import fetch as fetching
from cctest.base.errors import BAD_INPUT, FAILED
from cctest.cli.main import main
from cctest.model import archive
from tests import REPO

RUNS = REPO / "tests" / "fixtures" / "runs"
FIXTURES = {  # scenario/run_id: the fixture run directory
    "demo/20261122-232527-base-r0": RUNS / "demo-cubic-bbr-20261122-232527-base-r0",
    "cubic-bbr-shallow/20261121-231855-base-r0": RUNS / "cubic-bbr-shallow-20261121-231855-base-r0",
}


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args: object) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.output


def refused(*args: object, code: int = BAD_INPUT) -> str:
    """The one line a refused command prints (on stderr) with its exit code."""
    result = invoke(*args)
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) below `root`, by relative path."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """Two recorded runs, with a folder of raw captures added to one, as `cctest run --out` lays them out."""
    root = tmp_path / "src"
    for where, run in FIXTURES.items():
        shutil.copytree(run, root / where)
    raw = root / "demo" / "20261122-232527-base-r0" / "raw"
    (raw / "empty").mkdir(parents=True)
    (raw / "ss.jsonl").write_text('{"t": 0.1}\n' * 1000)
    return root


@pytest.fixture
def packed(src: Path, tmp_path: Path) -> Path:
    """The two runs archived into a folder, the manifest naming it by its file:// URL."""
    dest = tmp_path / "archives"
    out = ok("archive", src, dest, "--base-url", dest.as_uri() + "/")
    assert out.strip() == f"archived 2 run(s) into {dest} ({fetching.shown_size(archived_bytes(dest))}); " \
                          f"their manifest: {dest / 'manifest.json'}"
    return dest


def archived_bytes(dest: Path) -> int:
    return sum(p.stat().st_size for p in dest.glob("*.tar.gz"))


def test_each_run_is_one_archive_and_the_manifest_lists_every_file_with_its_sha256(src, packed):
    manifest = archive.read(packed / "manifest.json")
    assert [run.where for run in manifest.runs] == sorted(FIXTURES)
    assert manifest.base_url == packed.as_uri() + "/" and manifest.format == "tar.gz"
    for run in manifest.runs:
        assert run.file == f"{run.scenario}__{run.run_id}.tar.gz"
        assert run.size == (packed / run.file).stat().st_size and run.sha256 == sha256(packed / run.file)
        files = {path: data for path, data in tree(src / run.where).items() if data is not None}
        assert [m.path for m in run.members] == sorted(files)
        assert all(m.sha256 == hashlib.sha256(files[m.path]).hexdigest() and m.size == len(files[m.path])
                   for m in run.members)
    assert sorted(p.name for p in packed.iterdir()) == sorted([*(r.file for r in manifest.runs), "manifest.json"])
    assert archive.parse((packed / "manifest.json").read_bytes(), "again").to_json() == \
        (packed / "manifest.json").read_text()


def test_the_same_runs_give_the_same_bytes_wherever_and_whenever_they_are_packed(src, packed, tmp_path):
    moved = tmp_path / "elsewhere" / "runs"
    shutil.copytree(src, moved)
    for path in moved.rglob("*"):  # other times, other modes: the archive keeps neither
        os.utime(path, (1_700_000_000, 1_700_000_000))
        if path.is_file():
            path.chmod(0o600)
    again = tmp_path / "again"
    ok("archive", moved, again, "--base-url", packed.as_uri() + "/")
    assert tree(again) == tree(packed)
    ok("archive", src, again, "--base-url", packed.as_uri() + "/")  # over its own output: replaced, the same
    assert tree(again) == tree(packed)


def test_fetch_through_file_url_unpacks_each_run_byte_for_byte(src, packed, tmp_path):
    dest = tmp_path / "fetched"
    out = ok("fetch", packed / "manifest.json", dest)
    assert "cubic-bbr-shallow/20261121-231855-base-r0: fetched and checked (9 files, " in out
    assert out.strip().splitlines()[-1].startswith(f"fetched 2 run(s) into {dest} (")
    assert tree(dest) == tree(src)
    again = ok("fetch", packed / "manifest.json", dest)
    assert "demo/20261122-232527-base-r0: already there, every file as the manifest says; skipped" in again
    assert again.strip().splitlines()[-1] == f"fetched 0 run(s) into {dest} (0 kB); 2 already there"
    assert tree(dest) == tree(src)


@pytest.fixture
def served(packed: Path, monkeypatch) -> Iterator[str]:
    """The archives served over HTTP on 127.0.0.1 from a thread: their base URL."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(packed)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_fetch_over_http_unpacks_each_run_byte_for_byte(src, packed, served, tmp_path):
    manifest = tmp_path / "records" / "manifest.json"  # committed apart from the archives, as a lab would
    manifest.parent.mkdir()
    manifest.write_text((packed / "manifest.json").read_text().replace(json.dumps(packed.as_uri() + "/"),
                                                                       json.dumps(served)))
    assert archive.read(manifest).base_url == served
    dest = tmp_path / "fetched"
    ok("fetch", manifest, dest)
    assert tree(dest) == tree(src)
    missing = tmp_path / "missing"
    line = refused("fetch", manifest, missing, "--base-url", served + "nowhere/", code=FAILED)
    assert "HTTP 404" in line and "nothing of cubic-bbr-shallow/20261121-231855-base-r0 was kept" in line
    assert not missing.exists()


def test_only_picks_runs_by_scenario_run_id_or_both(packed, src, tmp_path):
    for only, fetched in [(["demo"], ["demo"]), (["20261121-231855-base-r0"], ["cubic-bbr-shallow"]),
                          (["demo/20261122-232527-base-r0", "cubic-bbr-shallow"], ["cubic-bbr-shallow", "demo"])]:
        dest = tmp_path / "_".join(only).replace("/", "-")
        ok("fetch", packed / "manifest.json", dest, *[arg for value in only for arg in ("--only", value)])
        assert sorted(p.name for p in dest.iterdir()) == fetched
        assert all(tree(dest / s) == tree(src / s) for s in fetched)
    line = refused("fetch", packed / "manifest.json", tmp_path / "none", "--only", "demo", "--only", "nope")
    assert line == (f"error: --only nope: no run in {packed / 'manifest.json'} has that scenario, run id or "
                    "scenario/run_id (its scenarios: cubic-bbr-shallow, demo)")
    assert not (tmp_path / "none").exists()


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, said", [
    (lambda a: _flip_a_byte(a), "has sha256 "),
    (lambda a: a.write_bytes(a.read_bytes()[:-10]), " bytes, the manifest says "),
    (lambda a: a.write_bytes(a.read_bytes() + b"\0"), "holds more than the manifest's "),
])
def test_a_corrupted_archive_is_refused_and_nothing_of_it_is_written(packed, tmp_path, damage, said):
    manifest = archive.read(packed / "manifest.json")
    first = manifest.runs[0]
    damage(packed / first.file)
    dest = tmp_path / "fetched"
    line = refused("fetch", packed / "manifest.json", dest)
    assert line.startswith(f"error: {first.where}: {(packed / first.file).as_uri()}") and said in line
    assert line.endswith("nothing of the run was kept")
    assert not dest.exists()
    dest.mkdir()
    refused("fetch", packed / "manifest.json", dest)
    assert list(dest.iterdir()) == []  # not even the scenario's folder, nor a hidden download


def _edit(manifest: Path, change) -> None:
    data = json.loads(manifest.read_text())
    change(data)
    manifest.write_text(json.dumps(data))


def _set(path: tuple, value):
    def change(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


@pytest.mark.parametrize("change, said", [
    (lambda m: m.write_text("{"), "not JSON (JSONDecodeError"),
    (lambda m: m.write_text("[]"), "not a JSON object; a manifest is one"),
    (lambda m: _edit(m, _set(("manifest_version",), 2)), "manifest_version 2, which this cctest does not read"),
    (lambda m: _edit(m, _set(("extra",), 1)), "unreadable (extra: not a field of a manifest)"),
    (lambda m: _edit(m, _set(("format",), "tar.xz")), "unreadable (format must be 'tar.gz', not 'tar.xz')"),
    (lambda m: _edit(m, _set(("base_url",), "ftp://x/")), "unreadable (base_url must be a file://, http://"),
    (lambda m: _edit(m, _set(("runs", 0, "sha256"), "ABC")), "runs.0.sha256 must be a sha256 (64 lowercase hex"),
    (lambda m: _edit(m, _set(("runs", 0, "size"), -1)), "runs.0.size must be a size in bytes"),
    (lambda m: _edit(m, _set(("runs", 0, "file"), "../x.tar.gz")), "runs.0.file must be a file name of letters"),
    (lambda m: _edit(m, _set(("runs", 0, "run_id"), "..")), "runs.0.run_id must be one folder's name"),
    (lambda m: _edit(m, _set(("runs", 0, "scenario"), "a/b")), "runs.0.scenario must be one folder's name"),
    (lambda m: _edit(m, _set(("runs", 0, "members", 0, "path"), "../../etc/x")),
     "runs.0.members.0.path must be a relative path inside the run"),
    (lambda m: _edit(m, _set(("runs", 0, "members", 1, "path"), "checks.json")), "checks.json is listed twice"),
    (lambda m: _edit(m, _set(("runs", 1, "file"), json.loads(m.read_text())["runs"][0]["file"])),
     "runs: file cubic-bbr-shallow__20261121-231855-base-r0.tar.gz is listed twice"),
    (lambda m: (m.unlink(), m.symlink_to("/dev/zero")), "is a device, not a regular file"),
    (lambda m: m.unlink(), "cannot read (No such file or directory)"),
])
def test_a_corrupted_manifest_is_refused_in_one_line_and_nothing_is_written(packed, tmp_path, change, said):
    manifest = packed / "manifest.json"
    change(manifest)
    dest = tmp_path / "fetched"
    line = refused("fetch", manifest, dest)
    assert line.startswith(f"error: {manifest}: ") and said in line, line
    assert not dest.exists()


@pytest.mark.parametrize("change, said", [
    (_set(("runs", 0, "members", 0, "sha256"), "0" * 64), "holds checks.json with sha256 "),
    (_set(("runs", 0, "members", 0, "size"), 1), "holds checks.json of 1223 bytes, the manifest says 1"),
    (lambda d: d["runs"][0]["members"].pop(), "holds throughput.parquet, which the manifest does not list"),
    (lambda d: d["runs"][0]["members"].append({"path": "zz", "size": 0, "sha256": "0" * 64}),
     "lacks zz, which the manifest lists"),
])
def test_a_manifest_that_lists_other_files_than_the_archive_holds_is_refused_and_nothing_is_left(
        packed, tmp_path, change, said):
    manifest = packed / "manifest.json"
    _edit(manifest, change)
    dest = tmp_path / "fetched"
    dest.mkdir()
    line = refused("fetch", manifest, dest, "--only", "cubic-bbr-shallow")
    assert line.startswith("error: cubic-bbr-shallow/20261121-231855-base-r0: its archive ") and said in line, line
    assert list(dest.iterdir()) == []


def test_a_run_already_there_that_differs_is_refused_before_anything_is_fetched(packed, tmp_path):
    dest = tmp_path / "fetched"
    ok("fetch", packed / "manifest.json", dest, "--only", "demo")
    run = dest / "demo" / "20261122-232527-base-r0"
    (run / "meta.json").write_text("{}")
    before = tree(dest)
    line = refused("fetch", packed / "manifest.json", dest)
    assert line.startswith(f"error: {run}: already there, but its meta.json has sha256 ")
    assert line.endswith("move it away to fetch the run again")
    assert tree(dest) == before  # the other run is not fetched either
    (run / "meta.json").unlink()
    assert "it lacks meta.json, which the manifest lists" in refused("fetch", packed / "manifest.json", dest)
    (run / "meta.json").symlink_to("/etc/passwd")
    assert "is a symbolic link" in refused("fetch", packed / "manifest.json", dest)


def test_an_interrupted_fetch_leaves_nothing_of_the_run(packed, tmp_path, monkeypatch):
    def interrupted(archive_path, root, run):
        os.mkdir(root)
        (root / "meta.json").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fetching, "_unpack", interrupted)
    dest = tmp_path / "fetched"
    with pytest.raises(KeyboardInterrupt):
        fetching.fetch(packed / "manifest.json", dest, (), None, say=print)
    assert not dest.exists()


def _sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler interrupts the sleep


def _ctrl_c() -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("interrupt", [_sigterm, _ctrl_c])
def test_fetch_interrupted_mid_download_keeps_the_runs_fetched_and_nothing_of_the_one_cut(
        packed, src, tmp_path, monkeypatch, interrupt):
    real = fetching._download

    def download(url, into, run):
        if run.scenario == "demo":  # the second run, after cubic-bbr-shallow
            into.write(b"half")
            interrupt()
        real(url, into, run)

    monkeypatch.setattr(fetching, "_download", download)
    handler = signal.getsignal(signal.SIGTERM)
    dest = tmp_path / "fetched"
    result = invoke("fetch", packed / "manifest.json", dest)
    assert result.exit_code == 130, result.output
    assert result.output.strip().splitlines()[-1] == ("interrupted: the runs fetched so far are kept, nothing of "
                                                      "the run being fetched")
    assert sorted(p.name for p in dest.iterdir()) == ["cubic-bbr-shallow"]  # no demo/, no hidden download
    assert tree(dest) == {k: v for k, v in tree(src).items() if k.startswith("cubic-bbr-shallow")}
    assert signal.getsignal(signal.SIGTERM) == handler


def test_an_interrupted_archive_leaves_no_archive_half_written_and_no_manifest(src, tmp_path, monkeypatch):
    from cctest.analysis import archive as packing

    real = packing.pack
    calls = []

    def interrupted(planned, out):
        calls.append(planned)
        if len(calls) == 2:
            out.write(b"half")
            raise KeyboardInterrupt
        return real(planned, out)

    monkeypatch.setattr(packing, "pack", interrupted)
    dest = tmp_path / "archives"
    with pytest.raises(KeyboardInterrupt):
        packing.write(packing.plan(src, dest, None), dest, None)
    assert [p.name for p in dest.iterdir()] == [calls[0].file]  # the first whole, nothing else


def test_archive_refuses_bad_input_in_one_line_and_writes_nothing(src, tmp_path):
    dest = tmp_path / "archives"
    run = src / "demo" / "20261122-232527-base-r0"
    cases = [
        ([tmp_path / "none", dest], "no such file or directory"),
        ([src, dest, "--base-url", "ftp://host/x/"], "--base-url must be a file://, http:// or https:// URL"),
        ([src, dest, "--base-url", "https:///x/"], "--base-url must name a host"),
        ([src, run / "inside"], "inside the run directory"),
    ]
    for args, said in cases:
        assert said in refused("archive", *args)
        assert not dest.exists() and not (run / "inside").exists()
    (run / "raw" / "link").symlink_to("/etc/passwd")
    assert refused("archive", src, dest) == (f"error: {run / 'raw' / 'link'}: is a symbolic link; an archive holds "
                                             "a run's regular files and folders only")
    (run / "raw" / "link").unlink()
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "run_id": "../x"}))
    assert "meta.json: run_id must be one folder's name" in refused("archive", src, dest)
    (run / "meta.json").write_text(json.dumps({**meta, "scenario": "cubic-bbr-shallow",
                                               "run_id": "20261121-231855-base-r0"}))
    assert "the same scenario/run id (cubic-bbr-shallow/20261121-231855-base-r0) as" in refused("archive", src, dest)
    assert not dest.exists()


def test_archive_names_keep_to_what_a_release_asset_keeps():
    assert archive.archive_name("bbr+cws", "20261121-1-rate=5-r0") == "bbr_cws__20261121-1-rate_5-r0.tar.gz"
    assert archive.archive_url("https://h/releases/download/t", "a.tar.gz") == "https://h/releases/download/t/a.tar.gz"
    assert archive.archive_url("file:///x/", "a.tar.gz") == "file:///x/a.tar.gz"


def test_without_a_base_url_the_archives_are_fetched_from_beside_the_manifest(src, tmp_path):
    dest = tmp_path / "archives"
    ok("archive", src, dest)
    assert archive.read(dest / "manifest.json").base_url is None
    moved = tmp_path / "published"  # the archives and their manifest moved together
    shutil.move(dest, moved)
    ok("fetch", moved / "manifest.json", tmp_path / "fetched")
    assert tree(tmp_path / "fetched") == tree(src)


def test_fetch_refuses_a_destination_or_a_manifest_that_is_no_folder_or_file(packed, tmp_path):
    (tmp_path / "file").write_text("x")
    assert refused("fetch", packed / "manifest.json", tmp_path / "file") == \
        f"error: {tmp_path / 'file'}: is a regular file; DEST is the folder the runs go in"
    (tmp_path / "d" / "demo").mkdir(parents=True)
    (tmp_path / "d" / "demo" / "20261122-232527-base-r0").write_text("x")
    assert "is a regular file; a folder holds the run" in refused("fetch", packed / "manifest.json", tmp_path / "d")
    assert refused("fetch", packed, tmp_path / "new") == \
        f"error: {packed}: is a directory, not a regular file; a manifest is a regular file"
    assert not (tmp_path / "new").exists()
    assert "--base-url must name a folder by its absolute path" in refused(
        "fetch", packed / "manifest.json", tmp_path / "new", "--base-url", "file://host/x")


def _hostile(tmp_path: Path, add) -> Path:
    """A tar.gz of the demo run's folder plus what `add(tar)` puts in it."""
    import io
    import tarfile

    path = tmp_path / "hostile.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        root = tarfile.TarInfo("demo/20261122-232527-base-r0")
        root.type = tarfile.DIRTYPE
        tar.addfile(root)
        add(tar, io)
    return path


def _link(tar, io) -> None:
    import tarfile

    info = tarfile.TarInfo("demo/20261122-232527-base-r0/meta.json")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    tar.addfile(info)


def _escape(tar, io) -> None:
    import tarfile

    info = tarfile.TarInfo("demo/20261122-232527-base-r0/../../escaped")
    info.size = 1
    tar.addfile(info, io.BytesIO(b"x"))


@pytest.mark.parametrize("add, said", [
    (_link, "holds meta.json, which the manifest does not list as a file of the run"),
    (_escape, "holds 'demo/20261122-232527-base-r0/../../escaped', which is no path inside"),
])
def test_an_archive_that_holds_a_link_or_a_path_outside_its_run_is_refused(packed, tmp_path, add, said):
    """Even when the manifest vouches for its bytes (a manifest and archives made to match)."""
    manifest = packed / "manifest.json"
    data = json.loads(manifest.read_text())
    demo = next(run for run in data["runs"] if run["scenario"] == "demo")
    hostile = _hostile(tmp_path, add)
    shutil.copy(hostile, packed / demo["file"])
    demo["size"], demo["sha256"] = hostile.stat().st_size, sha256(hostile)
    manifest.write_text(json.dumps(data))
    dest = tmp_path / "fetched"
    line = refused("fetch", manifest, dest, "--only", "demo")
    assert said in line, line
    assert not dest.exists() and not (tmp_path / "escaped").exists() and not (packed / "escaped").exists()
