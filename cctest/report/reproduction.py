"""docs/reproduction.md: every suite claim of experiments.yaml, judged on runs (their compact records
in records/, or run directories).

`cctest check DIR... --markdown FILE` writes it. Per paper, one table of the claims in the score
(scenarios tagged `paper-00N`, claims a paper measured), one of its sanity checks (`sanity: true`)
one of its scaled-down scenarios (tagged `quick-00N`) and one of the other readings of a specification
its variants were run in (tagged `reading-00N`, the before/after tables): the claim, its source, the paper's value,
our values per matrix point (the interval judged), n, the claim's status, its triage and a one-line
reason. A suite's `readings:` tables follow its claims: the same measures over a variant's readings
and its baseline, side by side. A claim no run measured is listed as not run, never left out. The
score counts the claims in the score only: passes, known failures, fails, inconclusive, incomplete
and not run apart, and the sanity checks beside it (docs/papers.md, "Protocol").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

from ..analysis.claims import ClaimResult, status_counts
from ..analysis.readings import Cell
from ..base import atomic
from ..base.safeload import Refused, decode_utf8, read_bounded
from ..model.record import RunRecord
from ..model.suites import Readings, suite_tag_of

APART = ("quick-", "reading-")  # tags of the scenarios listed apart from the score
SCORE_MARK = "<!-- reproduction-score -->"  # the README line `--readme` rewrites
REGENERATE = "cctest check records --markdown docs/reproduction.md --readme README.md"
STATUS_TEXT = {"pass": "pass", "fail": "**fail**", "known-fail": "known fail", "unexpected-pass": "**unexpected pass**",
               "inconclusive": "inconclusive", "incomplete": "incomplete", "not-run": "not run"}


def paper_of(tags: Iterable[str]) -> str | None:
    """The paper a suite scenario reproduces, as its paper-00N tag (a quick-00N or reading-00N
    scenario's too)."""
    return next((suite for suite in map(suite_tag_of, tags) if suite), None)


def score(claim_results: list[ClaimResult]) -> str:
    """"P of T claims pass" over the claims in the score, every other status counted apart (known
    failures included), then the sanity checks; quick-* and reading-* scenarios' claims are in neither."""
    scored = [r for r in claim_results if r.expectation.scored]
    n = status_counts(scored)
    rest = [f"{n['known-fail']} known failure(s)", f"{n['fail']} fail"]
    rest += [f"{n[s]} {STATUS_TEXT[s].strip('*')}" for s in ("unexpected-pass", "inconclusive", "incomplete",
                                                              "not-run") if n[s] or s != "unexpected-pass"]
    sanity = [r for r in claim_results if r.expectation.sanity and paper_of(r.expectation.tags)
              and not _apart(r)]
    checks = status_counts(sanity)
    return (f"{n['pass']} of {len(scored)} claims pass ({'; '.join(rest)}); sanity checks outside the score: "
            f"{checks['pass']} of {len(sanity)} pass")


def _tagged(r: ClaimResult, prefix: str) -> bool:
    return any(t.startswith(prefix) for t in r.expectation.tags)


def _apart(r: ClaimResult) -> bool:
    return any(_tagged(r, prefix) for prefix in APART)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _number(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "–"


def _measured(r: ClaimResult) -> tuple[str, str]:
    """Our values per point, with the interval judged (Verdict.measured: a bounded term's clipped
    interval, a seed-paired margin, a race's runs), and the repetitions they rest on."""
    lines, ns = [], []
    for v in r.points:
        if v.verdict == "not run":
            continue
        terms = re.sub(r" \(n=\d+\)", "", v.measured()) if v.values else ""
        where = v.point.split(" [", 1)[1].rstrip("]") if " [" in v.point else v.point
        prefix = f"{where}: " if len(r.points) > 1 or v.point == "across points" else ""
        lines.append(_cell(prefix + (terms or v.verdict)))
        ns.append(v.margin[2])
    n = (str(min(ns)) if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}") if ns else "0"
    return "<br>".join(lines) or "–", n


def _reason(r: ClaimResult) -> str:
    e = r.expectation
    if r.status == "not-run":
        return "no run directory of this scenario" + (" at these points" if e.where else "")
    if e.known and r.status in ("known-fail", "unexpected-pass"):
        text = e.known.reason if r.status == "known-fail" else f"known to fail ({e.known.reason}) but passed"
        return text + (f"; {r.reason}" if r.reason else "")
    return r.reason


def engine_of(record: RunRecord) -> str:
    """How a run was measured, as the page names it: the emulator (and its clock), or the host."""
    if record.engine is not None and record.engine.name:
        return record.engine.name
    vm = record.vm  # an empty object names no VM
    return "qemu" if vm is not None and vm.model_dump(exclude_unset=True) else "native"


def run_command(tag: str, engines: set[str]) -> str:
    """The command that made a suite's runs: its engine as the runs record it (UML's is named)."""
    engine = " --engine uml" if engines == {"uml"} else ""
    # -j 2: two guests on two cores give 1.85x one's throughput and, on the virtual clock, the same
    # results (docs/virtual-clock.md); no -n: the scenario's declared repetitions are the n judged
    return f"cctest run --vm{engine} -j 2 --tag {tag} --out results/{tag}"


def render(claim_results: list[ClaimResult], runs: int, inputs: list[str], command: str, titles: dict[str, str],
           engines: dict[str, set[str]] | None = None, builds: dict[str, set[str]] | None = None,
           tables: dict[str, list[tuple[Readings, list[list[Cell | None]]]]] | None = None) -> str:
    """`titles`: per paper tag, its suite's title (the experiments file's suites, in their order);
    `engines`: per paper tag, the engines its runs were measured on; `builds`: per scenario, the
    engine, kernel and module builds its runs ran (named under the claims in the score); `tables`:
    per paper tag, its suite's readings tables with their cells (analysis/readings.py)."""
    engines, builds, tables = engines or {}, builds or {}, tables or {}
    by_paper: dict[str, list[ClaimResult]] = {tag: [] for tag in titles}
    for r in claim_results:
        by_paper.setdefault(paper_of(r.expectation.tags) or "other", []).append(r)
    out = ["# Reproduction of the seed papers", "",
           f"Generated by `{command}` from {runs} run{'' if runs == 1 else 's'} "
           f"({', '.join(f'`{p}`' for p in inputs) or 'none'}); do not edit by hand. Each claim is "
           "experiments.yaml's, judged under docs/papers.md's \"Protocol\": per matrix point on exactly the "
           "scenario's declared repetitions (fewer: incomplete), runs of one module build and one engine, on "
           "the 95 % Student-t interval of the margins (kept inside a bounded metric's range; a comparison of "
           "two terms on its seed-paired margin), a race on how many of its runs the claim held in; runs whose "
           "health failed left out (the point is then inconclusive). Status: pass; fail; known fail (an "
           "expected failure with its triage: *implementation*, *spec*, *setting* or *paper*); unexpected "
           "pass (a known failure that now passes); inconclusive; incomplete (k of n runs); not run. The score "
           "counts the claims of the paper-scale scenarios (tag paper-00N) that a paper measured; sanity "
           "checks, the scaled-down scenarios (tag quick-00N) and the other readings of a specification (tag "
           "reading-00N, for before/after tables) are listed apart, outside it.", "",
           f"**Score: {score(claim_results)}.**", ""]
    for tag, rows in by_paper.items():
        if not rows and not tables.get(tag):
            continue
        title = titles.get(tag, "Other claims")
        measured_on = sorted(engines.get(tag, ()))
        out += [f"## {title}", "", f"Score: {score(rows)}.", "",
                (f"Measured on: {', '.join(measured_on)} (docs/uml.md says how the engines differ). "
                 if measured_on else "") +
                f"Reproduce: `{run_command(tag, set(measured_on))}`, then `cctest record results/{tag} records/{tag}` "
                f"and `{REGENERATE}` "
                "(docs/papers.md, \"Publishing the reproduction\").", ""]
        scored = [r for r in rows if r.expectation.scored]
        sanity = [r for r in rows if r.expectation.sanity and not _apart(r)]
        quick = [r for r in rows if _tagged(r, "quick-")]
        readings = [r for r in rows if _tagged(r, "reading-")]
        for heading, part in (("", scored), ("### Sanity checks (no paper measurement; outside the score)", sanity),
                              ("### Scaled-down scenarios (quick; outside the score)", quick),
                              ("### Other readings of the specification (before/after; outside the score)", readings)):
            if part:
                out += ([heading, ""] if heading else []) + _table(part)
            if part is scored:
                out += _builds(part, builds) + _readings(tables.get(tag, []))
    return "\n".join(out)


def _readings(tables: list[tuple[Readings, list[list[Cell | None]]]]) -> list[str]:
    """A suite's readings tables: per row, each column's mean +- its 95 % interval (n), then the paper's."""
    if not tables:
        return []
    out = ["### Readings side by side", "",
           "The same measures over the specification's readings and the baselines (each cell: the mean of the "
           "runs a claim at that point is judged on, +- the 95 % Student-t interval, n).", ""]
    for table, cells in tables:
        out += [f"**{_cell(table.title)}**", "",
                "| | " + " | ".join(_cell(c.label) for c in table.columns) + " | the paper |",
                "|---" * (len(table.columns) + 2) + "|"]
        for row, measured in zip(table.rows, cells, strict=True):
            out.append("| " + " | ".join([_cell(row.label), *(_reading(c) for c in measured),
                                          _cell(row.paper or "–")]) + " |")
        out.append("")
    return out


def _reading(c: Cell | None) -> str:
    if c is None:
        return "not run"
    half = f" ± {_plain(c.half_width, 2)}" if math.isfinite(c.half_width) else ""
    return f"{_plain(c.mean, 3)}{half} ({c.n})"


def _plain(x: float, digits: int) -> str:
    """`digits` significant digits, written out where that needs no exponent (9,290, not 9.29e+03)."""
    return f"{float(f'{x:.{digits}g}'):,.0f}" if abs(x) >= 10 ** digits else f"{x:.{digits}g}"


def _builds(rows: list[ClaimResult], builds: dict[str, set[str]]) -> list[str]:
    """Which builds each scored scenario's runs ran: the page's answer to "which build is this"."""
    lines = [f"- `{name}`: " + " | ".join(f"`{b}`" for b in sorted(builds[name]))
             for name in dict.fromkeys(r.expectation.scenario for r in rows) if builds.get(name)]
    return (["Builds (engine, kernel, modules) of the runs judged above:", ""] + lines + [""]) if lines else []


def _table(rows: list[ClaimResult]) -> list[str]:
    out = ["| claim | source | paper | ours (the interval judged) | n | status | triage | reason |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        e = r.expectation
        where = ", ".join(f"{k}={'/'.join(map(str, v))}" for k, v in e.where.items())
        extra = [x for x in (f"at least {e.at_least} points" if e.at_least else "",
                             f"in at least {e.at_least_runs} of {e.repetitions} runs" if e.at_least_runs else "",
                             f"steady from {e.steady_from_s:g} s" if e.steady_from_s is not None else "") if x]
        claim = f"`{e.scenario}`" + (f" ({where})" if where else "") + f": `{e.claim.text}`" + \
            (f" ({', '.join(extra)})" if extra else "")
        measured, n = _measured(r)
        triage = e.known.triage if e.known else ("untriaged" if r.status == "fail" else "")
        status = STATUS_TEXT[r.status]
        out.append("| " + " | ".join([_cell(claim), _cell(e.source), _cell(e.paper or "–"), measured, n,
                                      status, triage, _cell(_reason(r))]) + " |")
    out.append("")
    return out


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, text)


MAX_README_BYTES = 4 << 20


def _readme_lines(readme: Path) -> list[str]:
    try:
        text = decode_utf8(read_bounded(readme, MAX_README_BYTES, "a README"))
    except Refused as error:
        raise Refused(f"{readme}: {error}") from None
    return text.splitlines(keepends=True)


def has_score_line(readme: Path) -> bool:
    """Whether the README has the line --readme rewrites (asked before anything is written)."""
    return any(SCORE_MARK in line for line in _readme_lines(readme))


def update_readme(readme: Path, markdown: Path, claim_results: list[ClaimResult]) -> bool:
    """Rewrite the README line that carries SCORE_MARK with the current score; False when there is none."""
    lines = _readme_lines(readme)
    for i, line in enumerate(lines):
        if SCORE_MARK in line:
            try:
                link = markdown.resolve().relative_to(readme.resolve().parent).as_posix()
            except ValueError:
                link = str(markdown)
            lines[i] = (f"{SCORE_MARK} **Reproduction of the seed papers:** {score(claim_results)}: "
                        f"[{link}]({link}).\n")
            atomic.write_text(readme, "".join(lines))
            return True
    return False
