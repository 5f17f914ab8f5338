"""`cctest report` and `cctest check`: the Click commands (registered by cctest.cli.main with
cli.add_command). Their errors carry their exit codes (cctest.base.errors), also when run on their own."""

from __future__ import annotations

import time
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..analysis import defaults
from ..analysis.defaults import DEFAULT_MAX_POINTS
from ..base import atomic, errors
from ..base.errors import BadInput, CctestError, ClaimsFailed, printable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from click.decorators import FC

    from ..analysis.claims import Verdict
    from ..analysis.judge import Claims
    from ..analysis.load import Run
    from ..model.scenario import Experiments


def claims_options(command: FC) -> FC:
    """-f FILE and --recorded-claims: whose claims `report` and `check` judge the runs with."""
    command = click.option("--recorded-claims", is_flag=True,
                           help="Judge with the claims recorded in each run's scenario.yaml instead of the "
                                "experiments file's (run directories from another project).")(command)
    return click.option("-f", "--file", "experiments_file", default=DEFAULT_EXPERIMENTS, show_default=True,
                        type=click.Path(dir_okay=False),
                        help="The experiments file whose claims (known: included) judge the runs.")(command)


DEFAULT_EXPERIMENTS = "experiments.yaml"


def claims_source(experiments_file: str, recorded: bool, every_scenario: bool = False) -> Claims:
    """The Claims to judge with; an experiments file named with -f that does not exist is bad input.
    Without -f and with no experiments.yaml here (run directories judged outside a checkout, as a
    report-only install does), the runs' recorded claims judge, and the first line says so."""
    from ..analysis.judge import Claims

    if recorded:
        return Claims(None)
    if experiments_file == DEFAULT_EXPERIMENTS and not Path(experiments_file).exists():
        return Claims(None, why=f"no {DEFAULT_EXPERIMENTS} here")
    if not Path(experiments_file).is_file():
        raise BadInput(f"{experiments_file}: no such experiments file: name one with -f FILE, or judge with the "
                       "runs' own claims with --recorded-claims")
    return Claims(experiments_file, every_scenario)


@click.command("report", cls=errors.Command)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("report.html"),
              show_default=True,
              help="HTML file to write; NAME.summary.csv, NAME.summary.json (and NAME.claims.json) go beside it.")
@click.option("--open", "open_", is_flag=True, help="Open the report in a web browser.")
@click.option("--bin-ms", type=click.FloatRange(min=1), default=None,
              help="Throughput bin width [default: one RTT of the slowest flow, at least 100 ms].")
@click.option("--skip-s", type=click.FloatRange(min=0), default=defaults.DEFAULT_SKIP_S, show_default=True,
              help="Steady state starts this many seconds after time zero.")
@click.option("--jain-window-s", type=click.FloatRange(min=0.01), default=defaults.DEFAULT_JAIN_WINDOW_S,
              show_default=True, help="Sliding window of the Jain-over-time series.")
@click.option("--max-points", type=click.IntRange(min=100), default=DEFAULT_MAX_POINTS, show_default=True,
              help="Display points per trace (metrics always use every sample).")
@click.option("--compare", "compare_paths", nargs=2, type=click.Path(path_type=Path),
              metavar="BASELINE CANDIDATE", help="Compare two sets of runs; exit 1 on any regression.")
@click.option("--threshold", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="With --compare: % change in the worse direction that counts as a regression.")
@click.option("--title", help="Page title.")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write every figure of the page to DIR/<run id>/ and DIR/across-runs/ as vector "
                   "files (needs the export extra and a system Chromium).")
@click.option("--format", "figures_format", type=click.Choice(["svg", "pdf"]), default="svg", show_default=True,
              help="With --figures: the files' format.")
@click.option("--no-fail", is_flag=True, help="Report failed claims without exit code 3.")
@claims_options
def report_command(paths: tuple[Path, ...], output: Path, open_: bool, bin_ms: float | None, skip_s: float,
                   jain_window_s: float, max_points: int, compare_paths: tuple[Path, Path] | None, threshold: float,
                   title: str | None, figures_dir: Path | None, figures_format: str, no_fail: bool,
                   experiments_file: str, recorded_claims: bool) -> None:
    """Write one self-contained HTML report (plus its summary .csv/.json) from run directories.

    PATHS are run directories (holding meta.json) or any directories containing run directories
    at any depth.
    """
    if compare_paths and paths:
        raise click.UsageError("give either PATHS or --compare BASELINE CANDIDATE, not both")
    if not compare_paths and not paths:
        raise click.UsageError("give at least one run, scenario or sweep directory")
    # Imported here: pandas and plotly take seconds to import, and `cctest run` shares this CLI.
    from ..report.build import Options, write_report

    if figures_dir is not None:
        from ..report.export import check_available

        check_available(figures_format)  # before anything is written

    opts = Options(bin_ms=bin_ms, skip_s=skip_s, jain_window_s=jain_window_s, max_points=max_points,
                   title=title, figures_dir=figures_dir, figures_format=figures_format)
    claims = claims_source(experiments_file, recorded_claims)
    t = time.perf_counter()
    res = write_report(paths, output, opts, compare_paths=compare_paths, threshold_pct=threshold, claims=claims)
    dt = time.perf_counter() - t
    click.echo(printable(claims.describe()))  # first, once the runs could be read: an error stays one line
    for w in res.warnings:
        click.echo(printable(f"warning: {w}"), err=True)
    if res.compare is not None and not res.compare.empty:
        for r in res.compare.itertuples():
            mark = "REGRESSION" if r.regression else "ok"
            if r.n_candidate == 0:
                click.echo(printable(f"{mark:10s} {r.group}: {r.label}: {r.baseline:.4g} -> no value"))
                continue
            click.echo(printable(f"{mark:10s} {r.group}: {r.label}: {r.baseline:.4g} -> {r.candidate:.4g} "
                                 f"({r.delta_pct:+.1f} %, {r.better} is better)"))
    print_claims(res.claims)
    size = res.html.stat().st_size / 1e6
    click.echo(f"wrote {res.html} ({size:.1f} MB, {res.runs} run(s), {res.figures} figure(s), {dt:.1f} s), "
               f"{res.csv.name}, {res.json.name}" + (f", {res.claims_json.name}" if res.claims_json else ""))
    if res.exported:
        click.echo(f"exported {len(res.exported)} figure(s) as {figures_format} to {figures_dir}")
    if open_:
        webbrowser.open(res.html.resolve().as_uri())
    if res.compare is not None:
        assert compare_paths is not None  # res.compare is made only with --compare
        if res.compare.empty:
            raise BadInput(f"no configuration (scenario + matrix) present in both {compare_paths[0]} and "
                           f"{compare_paths[1]}: nothing compared")
        if res.regressions:
            raise CctestError(f"{res.regressions} regression(s) beyond {threshold:g} %")
    exit_on_claims(res.claims, no_fail)


def print_claims(verdicts: list[Verdict]) -> None:
    """One line per claim with its status; below a claim judged at several points, one per point."""
    from ..analysis.claims import results

    for r in results(verdicts):
        e = r.expectation
        points = r.points
        head = points[0].point if len(points) == 1 and points[0].point not in ("-", "across points") \
            else f"{e.scenario}" + (" (across points)" if points[0].point == "across points" else "")
        measured = f": {points[0].measured()}" if len(points) == 1 and points[0].values else ""
        known = f" [known, {e.known.triage}: {e.known.reason}]" if e.known else ""
        known += " [sanity: outside the score]" if e.sanity else ""
        reason = f" ({r.reason})" if r.reason else ""
        # the scenario name and the claim come from the run directory (meta.json, scenario.yaml)
        click.echo(printable(f"{r.status.upper():16s}{head}: {e.claim.text}{measured}{reason}{known}", limit=2000))
        if len(points) > 1:
            for v in points:
                click.echo(printable(f"    {v.verdict:13s}{v.point}: {v.measured()}"
                                     + (f" ({v.reason})" if v.reason and v.values else ""), limit=2000))
    from ..report.reproduction import score

    if any(v.expectation.scored for v in verdicts):
        click.echo(printable(f"score: {score(results(verdicts))}"))


def exit_on_claims(verdicts: list[Verdict], no_fail: bool) -> None:
    """Exit 3 when a claim fails or a known failure passes (docs/experiments.md, "Claims"); otherwise report."""
    from ..analysis.claims import GATE, results, status_counts

    if not verdicts:
        return
    n = status_counts(results(verdicts))
    tally = "claims: " + ", ".join(f"{count} {status}" for status, count in n.items())
    if any(n[s] for s in GATE) and not no_fail:
        raise ClaimsFailed(tally)
    click.echo(tally, err=True)


@click.command("check", cls=errors.Command)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("claims.json"),
              show_default=True, help="Where to write the verdicts.")
@click.option("--skip-s", type=click.FloatRange(min=0), default=defaults.DEFAULT_SKIP_S, show_default=True,
              help="Steady state starts this many seconds after time zero.")
@click.option("--markdown", "markdown", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the reproduction page (e.g. docs/reproduction.md): every paper-suite claim of the "
                   "experiments file judged on PATHS, one table per paper, never-run claims included.")
@click.option("--readme", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="With --markdown: rewrite this file's '<!-- reproduction-score -->' line with the score.")
@click.option("--no-fail", is_flag=True, help="Report failed claims without exit code 3.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON on stdout (as written to -o).")
@claims_options
def check_command(paths: tuple[Path, ...], output: Path, skip_s: float, markdown: Path | None, readme: Path | None,
                  no_fail: bool, as_json: bool, experiments_file: str, recorded_claims: bool) -> None:
    """Judge run directories with the experiments file's claims (as `cctest report`, without HTML).

    Each claim of a scenario that ran gets a status: pass, fail, known-fail, unexpected-pass,
    inconclusive (a failed-health run, or an interval that straddles the bound), incomplete (fewer
    runs than the scenario's repetitions) or not-run. Runs of two module builds or engines in one
    verdict are refused (exit 2, nothing written). Exit 3 on a fail (also: a claim whose runs lack
    the terms it needs) or an unexpected pass; 0 otherwise. With --markdown, PATHS are searched for
    runs of the suites (tags paper-000 ..., quick-000 ..., reading-000 ...) and the page lists every suite claim."""
    from ..analysis.claims import claims_json
    from ..analysis.judge import Measure, analyse, judge_claims
    from ..analysis.load import load_runs
    from ..base import jsonsafe

    if readme and not markdown:
        raise click.UsageError("--readme goes with --markdown")
    if markdown and recorded_claims:
        raise click.UsageError("--markdown judges the experiments file's suite claims: drop --recorded-claims")
    _check_outputs(paths, output, markdown, readme, experiments_file)
    claims = claims_source(experiments_file, recorded_claims)
    skipped: list[str] = []  # runs that could not be read or analysed: named, never silently dropped
    expectations = None
    if markdown:
        expectations, loaded, suites = _paper_suite_runs(paths, experiments_file, skipped)
    else:
        loaded = load_runs(paths, skipped)
    runs, res, summary = analyse(loaded, Measure(skip_s=skip_s), skipped)
    verdicts, notes = judge_claims(runs, res, expectations, claims)
    notes = skipped + notes
    if verdicts:  # first, once judged: an error stays one line
        click.echo(printable(claims.describe()), err=as_json)
    for note in notes:
        click.echo(printable(f"warning: {note}"), err=True)
    if not verdicts:
        whose = ("records an expect: list" if claims.file is None
                 else f"is of a scenario of {experiments_file} with claims")
        raise BadInput(f"no claims: none of the {len(runs)} run(s) {whose}")
    verdicts_json = jsonsafe.dumps(claims_json(verdicts, notes), indent=1)
    if as_json:
        click.echo(verdicts_json)
    else:
        print_claims(verdicts)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(output, verdicts_json)
    click.echo(f"wrote {output}", err=as_json)
    if markdown:
        _write_reproduction(markdown, readme, paths, verdicts, loaded, (runs, res), suites, as_json)
    exit_on_claims(verdicts, no_fail)


def _check_outputs(paths: Sequence[Path], output: Path, markdown: Path | None, readme: Path | None,
                   experiments_file: str) -> None:
    """Every file `check` writes, before anything is: regular files of their own, none an input or
    inside a run, none given twice, and a README that has the line its score goes on."""
    from ..analysis.judge import run_dirs_of
    from ..report.reproduction import SCORE_MARK, has_score_line

    outputs = [(output, "-o (the verdicts)")]
    outputs += [(markdown, "--markdown (the reproduction page)")] if markdown else []
    outputs += [(readme, "--readme (the README whose score line is rewritten)")] if readme else []
    inputs = _experiment_files(experiments_file) if markdown else []
    atomic.check_outputs(outputs, inputs=inputs, run_dirs=run_dirs_of(paths))
    if readme and not has_score_line(readme):
        raise BadInput(f"{readme}: no line with {SCORE_MARK} to put the score on")


def _experiment_files(experiments_file: str) -> list[Path]:
    """The experiments file and its suite files, none of which the page may overwrite (a file that
    cannot be read is named by the loader, later, in its own words)."""
    from ..model.scenario import ScenarioError, experiment_files

    try:
        return [path for _, path in experiment_files(experiments_file)]
    except ScenarioError:
        return [Path(experiments_file)]


def _paper_suite_runs(paths: Sequence[Path], experiments_file: str,
                      skipped: list[str]) -> tuple[list, list, Experiments]:
    """The paper suites' claims of the experiments file, the runs under PATHS that belong to a paper
    suite (their scenario.yaml carries a paper-00N tag) and the experiments file (its suites' titles
    and readings tables); what is left out is named in `skipped`."""
    from ..analysis.claims import expectations_of_experiments
    from ..analysis.load import ReportInputError, load_runs
    from ..analysis.provenance import scenario_tags
    from ..model.scenario import load_experiments
    from ..report.reproduction import paper_of

    experiments = load_experiments(experiments_file)
    expectations = [e for e in expectations_of_experiments(experiments) if paper_of(e.tags)]
    found = []
    for path in paths:  # a results tree with no runs yet is a page of "not run", not an error
        try:
            found += load_runs([path], skipped)
        except ReportInputError as error:
            skipped.append(str(error))
    # only runs of a paper suite: a targeted or ad-hoc run that shares a suite scenario's name
    # (results/targeted/) is not that suite's run
    loaded = [run for run in found if paper_of(scenario_tags(run))]
    stray = next((run for run in loaded if run.record.scenario not in experiments.scenarios), None)
    if stray is not None:  # its claims would silently drop out of the page and the gate
        raise BadInput(f"{stray.path}: a paper-suite run of scenario {stray.record.scenario!r}, which "
                       f"{experiments_file} lacks; its claims cannot be judged: add the scenario to the file or "
                       "leave the run out of PATHS")
    if len(loaded) < len(found):
        skipped.append(f"{len(found) - len(loaded)} run(s) without a paper-00N, quick-00N or reading-00N tag in "
                       "their scenario.yaml left out of the reproduction page")
    return expectations, loaded, experiments


def _write_reproduction(markdown: Path, readme: Path | None, paths: Sequence[Path], verdicts: list[Verdict],
                        loaded: list[Run], analysed: tuple[list, list], experiments: Experiments,
                        as_json: bool) -> None:
    """The reproduction page (one table per paper, and its suite's readings tables) and, with
    --readme, its score line in the README. `analysed`: the runs judged and their metrics."""
    from ..analysis.claims import results
    from ..analysis.provenance import engine_build, module_builds, scenario_tags
    from ..analysis.readings import measure
    from ..analysis.run_point import points_of
    from ..report import reproduction

    shown_paths = [Path(p).as_posix() for p in paths]
    command = f"cctest check {' '.join(shown_paths)} --markdown {markdown.as_posix()}" + \
        (f" --readme {readme.as_posix()}" if readme else "")
    per_claim = results(verdicts)
    engines: dict[str, set[str]] = {}
    builds: dict[str, set[str]] = {}  # scenario -> the engine and module builds its runs ran
    for run in loaded:
        paper = reproduction.paper_of(scenario_tags(run))
        if paper is not None:  # the engines are named per paper reproduced
            engines.setdefault(paper, set()).add(reproduction.engine_of(run.record))
        build = "; ".join(x for x in (engine_build(run.record), module_builds(run.record)) if x)
        builds.setdefault(str(run.record.scenario), set()).add(build)
    points = points_of(*analysed, with_series=False)
    declared = {name: scenario.repetitions for name, scenario in experiments.scenarios.items()}
    readings = {tag: [(table, measure(table, points, declared)) for table in suite.readings]
                for tag, suite in experiments.suites.items() if suite.readings}
    titles = {tag: suite.title for tag, suite in experiments.suites.items()}
    page = reproduction.render(per_claim, len(analysed[0]), shown_paths, command, titles, engines, builds, readings)
    reproduction.write(markdown, page)
    click.echo(f"wrote {markdown}: {reproduction.score(per_claim)}", err=as_json)
    if readme and not reproduction.update_readme(readme, markdown, per_claim):
        raise BadInput(f"{readme}: no line with {reproduction.SCORE_MARK} to put the score on")
