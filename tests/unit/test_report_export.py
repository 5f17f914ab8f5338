"""`cctest report --figures DIR --format svg|pdf`: every figure of the page as a vector file, in
the page's colours; a clear one-line error where it cannot run (no kaleido, no system Chromium)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from cctest.cli.report import report_command
from cctest.report import export
from cctest.report.colors import FIXED
from tests import REPO

DEMO = REPO / "tests" / "fixtures" / "runs" / "demo-cubic-bbr-20261122-232527-base-r0"
HAVE_BROWSER = export._browser() is not None


def _kaleido():
    pytest.importorskip("kaleido", reason="kaleido not installed (pip install 'cctest[export]')")


@pytest.mark.skipif(not HAVE_BROWSER, reason="no system Chromium (apt-get install chromium)")
def test_every_figure_of_the_page_is_written_as_svg_and_pdf(tmp_path):
    _kaleido()
    res = CliRunner().invoke(report_command, [str(DEMO), "-o", str(tmp_path / "demo.html"),
                                              "--figures", str(tmp_path / "svg")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "demo.html").read_text()
    keys = sorted(set(__import__("re").findall(r"data-key='([^']+)'", page)))
    files = sorted(tmp_path.glob("svg/*/*.svg"))
    assert sorted(f.stem for f in files) == keys and len(keys) >= 8
    assert f"exported {len(files)} figure(s) as svg" in res.output
    for f in files:
        assert ET.parse(f).getroot().tag.endswith("svg"), f
    throughput = next(f for f in files if f.stem == "throughput").read_text()
    assert "Throughput per flow" in throughput
    for cc in ("cubic", "bbr"):  # the page's cc colours, in rgb() as the SVG writes them
        h = FIXED[cc].lstrip("#")
        assert f"rgb({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)})" in throughput, cc
    res = CliRunner().invoke(report_command, [str(DEMO), "-o", str(tmp_path / "demo.html"),
                                              "--figures", str(tmp_path / "pdf"), "--format", "pdf"])
    assert res.exit_code == 0, res.output
    pdfs = sorted(tmp_path.glob("pdf/*/*.pdf"))
    assert len(pdfs) == len(files) and all(p.read_bytes()[:5] == b"%PDF-" for p in pdfs)


def test_without_a_system_browser_export_says_what_to_install(tmp_path, monkeypatch):
    _kaleido()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    res = CliRunner().invoke(report_command, [str(DEMO), "-o", str(tmp_path / "d.html"),
                                              "--figures", str(tmp_path / "f")])
    assert res.exit_code == 1
    assert "apt-get install chromium" in res.output and "never downloads" in res.output
    assert not (tmp_path / "f").exists() and not (tmp_path / "d.html").exists()  # checked before writing


def test_a_format_other_than_svg_or_pdf_is_bad_input(tmp_path):
    res = CliRunner().invoke(report_command, [str(DEMO), "-o", str(tmp_path / "d.html"), "--figures",
                                              str(tmp_path / "f"), "--format", "png"])
    assert res.exit_code == 2 and "png" in res.output
