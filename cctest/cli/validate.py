"""`cctest validate`: the Click command (registered by cctest.cli.main). Every check of the paths comes
before anything is written: a bad one is one line and exit 2, and no file changes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..base import errors
from ..base.errors import BadInput

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ..validation.gains import Summary


def _writable(path: Path, option: str, suffixes: tuple[str, ...]) -> None:
    if path.suffix not in suffixes:
        raise BadInput(f"{option} {path}: must end in {' or '.join(suffixes)}")
    if path.is_dir():
        raise BadInput(f"{option} {path}: is a directory; give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise BadInput(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BadInput(f"{option} {path}: not writable")


@click.command("validate", cls=errors.Command)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("docs/validation.md"),
              show_default=True, help="The page to write (markdown).")
@click.option("--figure", "figure_path", type=click.Path(path_type=Path),
              help="The heatmap pair as svg [default: beside the page, <page>-heatmap.svg]; without plotly's "
                   "exporter (kaleido and a system Chromium) a self-contained .html is written instead.")
@click.option("--html", "html_path", type=click.Path(path_type=Path),
              help="Also write a self-contained HTML page with the summary and the interactive heatmap.")
@click.option("--testbed", "testbed_path", type=click.Path(path_type=Path), default=None,
              help="The testbed's table [default: data/peer/cao2019/original_result_imc_bbr.csv].")
@click.option("--readme", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Rewrite this file's '<!-- validation-score -->' line with the agreement figures.")
def validate_command(paths: tuple[Path, ...], output: Path, figure_path: Path | None, html_path: Path | None,
                     testbed_path: Path | None, readme: Path | None) -> None:
    """Compare the peer suite's runs (peer/cao2019.yaml, tag peer-cao2019) with the testbed's table
    and write the validation page: per cell the testbed's gain of BBR over CUBIC, ours (mean and
    95 % interval over BBR/CUBIC pairs of one seed), the difference, the engine and kernel; the share
    of cells within 5 points; the sign agreement; a side-by-side heatmap.

    PATHS are run directories or directories holding them at any depth."""
    from ..validation import gains, heatmap, page, runs, testbed

    figure_path = figure_path or output.with_name(f"{output.stem}-heatmap.svg")
    _writable(output, "-o", (".md",))
    _writable(figure_path, "--figure", (".svg",))
    if html_path is not None:
        _writable(html_path, "--html", (".html", ".htm"))
    if readme is not None and not os.access(readme, os.W_OK):
        raise BadInput(f"--readme {readme}: not writable")
    table = testbed.read_table(testbed_path or testbed.TABLE)
    found = runs.read(list(paths), set(table))
    if not found.rows:
        raise BadInput(f"{' '.join(map(str, paths))}: no run of the peer suite's cells (one BBR or CUBIC flow "
                       f"on one of the testbed's {len(table)} links; {found.other} other run(s) found)")
    results = gains.compare(table, found.rows)
    summaries = [gains.summarise(results, engine, len(table)) for engine in gains.engines(results)]
    readme_text = None
    if readme is not None:
        readme_text = page.updated_readme(readme.read_text(), output, readme, summaries)
        if readme_text is None:
            raise BadInput(f"--readme {readme}: has no '{page.SCORE_MARK}' line to rewrite")

    from ..base import atomic

    fig = heatmap.figure(table, results, gains.engines(results))
    written, why = heatmap.write(fig, figure_path)
    figure_note = (f"The svg could not be rendered here ({why}); the heatmap is the interactive HTML file "
                   "above (install the `export` extra and a Chromium for the svg)." if why else "")
    notes = [f"{len(found.unreadable)} run director(ies) unreadable, left out; the first: {found.unreadable[0]}"
             ] if found.unreadable else []
    if found.other:
        notes.append(f"{found.other} run director(ies) under the paths are not cells of the table; not used.")
    link = os.path.relpath(written, output.parent)
    command = "cctest validate " + " ".join(str(p) for p in paths) + f" -o {output}"
    text = page.render(results, summaries, len(found.rows), [str(p) for p in paths], command, link,
                       figure_note, notes)
    atomic.write_text(output, text)
    if html_path is not None:
        atomic.write_text(html_path, _html(fig, summaries, text))
    if readme_text is not None:
        assert readme is not None  # readme_text is made only from a readme
        atomic.write_text(readme, readme_text)
    for s in summaries:
        click.echo(page.summary_line(s))
    if why:
        click.echo(errors.printable(f"warning: no svg ({why}); wrote the heatmap as {written}"), err=True)
    click.echo(f"wrote {output}, {written}" + (f", {html_path}" if html_path else "")
               + (f", {readme}" if readme_text else ""))


def _html(fig: go.Figure, summaries: list[Summary], markdown: str) -> str:
    """The report page: the summary and the heatmap pair, rendered as `cctest report` renders figures."""
    from ..report.figure import Fig
    from ..report.html import Page, esc
    from ..validation.page import summary_line

    html_page = Page("Validation against a real testbed", "Cao et al. 2019, Fig. 5, beside cctest's peer suite")
    html_page.h2("Summary", "summary")
    html_page.add("<ul>" + "".join(f"<li>{esc(summary_line(s))}</li>" for s in summaries) + "</ul>")
    html_page.h2("Heatmap", "heatmap")
    html_page.add(html_page.fig_html(Fig("BBR's goodput gain over CUBIC (%): testbed and cctest", fig,
                                         note="Same colour scale in every panel; blank: not run.",
                                         key="validation-heatmap")))
    html_page.h2("Every cell", "cells")
    html_page.add(f"<details class='yaml' open><pre>{esc(markdown)}</pre></details>")
    return html_page.render()
