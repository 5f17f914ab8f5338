"""Assemble a report: runs -> metrics -> summary files + one HTML page."""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..analysis.claims import Verdict, claims_json
from ..analysis.defaults import DEFAULT_MAX_POINTS
from ..analysis.judge import Claims, Measure, analyse, judge_claims, run_dirs_of
from ..analysis.load import ReportInputError, Run, load_runs, shown
from ..analysis.provenance import bottleneck_text, clock_text, code_text, is_wall_clock, scenario_yaml
from ..analysis.summary import (
    Summary,
    compare,
    spreadsheet_safe,
    summarize,
    summary_frame,
    summary_json,
    unmatched_groups,
)
from ..base import atomic, jsonsafe
from ..model.metric_table import COMPARED, RunMetrics
from ..model.record import LINK_SETTINGS, Link
from .claims_view import claims_section
from .colors import CCColors, flow_ccs
from .html import Page, esc, fmt, fmt_ci, table
from .run_figures import run_figures
from .sweep_figures import sweep_figures, throughput_table

if TYPE_CHECKING:
    from collections.abc import Sequence

NO_BOTTLENECK_NOTE = ("qdisc.parquet has no bottleneck samples while the flows ran: no drops, queue "
                      "occupancy or backlog delay")
MANY_RUNS = 12  # above this the overview table folds and per-run traces get fewer points
MIN_POINTS_MANY = 300


@dataclass
class Options(Measure):
    """How runs are measured (Measure) and drawn."""

    max_points: int = DEFAULT_MAX_POINTS
    title: str | None = None
    figures_dir: Path | None = None  # also write every figure there as a vector file (export.py)
    figures_format: str = "svg"

    def as_dict(self) -> dict:
        return {"bin_ms": self.bin_ms, "skip_s": self.skip_s, "jain_window_s": self.jain_window_s,
                "max_points": self.max_points}


@dataclass
class Result:
    html: Path
    csv: Path
    json: Path
    runs: int
    figures: int
    regressions: int = 0
    compare: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)
    claims: list[Verdict] = field(default_factory=list)
    claims_json: Path | None = None
    exported: list[Path] = field(default_factory=list)  # --figures: the vector files written


def _bin_text(opts: Options) -> str:
    return f"{opts.bin_ms:g} ms" if opts.bin_ms else "one RTT, at least 100 ms"




RECORD_NOTE = ("compact record(s) (record.json): their metrics, claims and tables as recorded; the figures of "
               "time series need the full run directories")


def _verdict_badge(checks: dict | None) -> str:
    v = (checks or {}).get("verdict") or "unknown"
    return f"<span class='badge {esc(v if v in ('pass', 'warn', 'fail') else 'unknown')}'>{esc(v)}</span>"


WALL_BADGE = ("<span class='badge wall' title='a VM on the host&#39;s clock: software emulation falls behind "
              "its timers by however much the host&#39;s load says; these numbers carry that doubt'>wall clock</span>")


def _provenance_html(run: Run) -> str:
    """Where this run's numbers came from: clock, code, seed, bottleneck, and its scenario as run."""
    record = run.record
    out = (f"<p class='kv'>clock <b>{esc(clock_text(record))}</b> · code <b>{esc(code_text(record))}</b> · seed "
           f"<b>{esc(record.seed)}</b> · bottleneck <b>{esc(bottleneck_text(record))}</b></p>")
    text = scenario_yaml(run)
    if text is not None:
        out += (f"<details class='yaml'><summary>scenario.yaml (as run)</summary><pre>{esc(text)}</pre></details>")
    return out


def page_colors(runs: list[Run]) -> CCColors:
    """One colour per congestion control for the whole page, in the order the runs name them."""
    return CCColors(cc for run in runs for cc in flow_ccs(run.record))


def _run_section(page: Page, run: Run, res: RunMetrics, opts: Options, open_: bool, index: int = 0,
                 colors: CCColors | None = None) -> None:
    """One run's folding section: its head line, facts, provenance, notes, health, metrics and figures."""
    side = f"[{esc(run.side)}] " if run.side else ""
    page.scope = (f"{run.side}-" if run.side else "") + run.run_id
    figs = [] if run.recorded is not None else run_figures(run, res, max_points=opts.max_points,
                                                            jain_window_s=opts.jain_window_s, colors=colors)
    out = [f"<details class='run' id='run-{index}'{' open' if open_ else ''}><summary>{side}{_run_head(run, res)}"
           "</summary>", _run_facts(run), _provenance_html(run), _run_notes_html(run, res), _health_html(run),
           _metrics_html(res, opts), _flow_tables(res)]
    page.add("".join(out))
    page.add("<div class='grid'>" + "".join(page.fig_html(f) for f in figs) + "</div></details>")


def _run_head(run: Run, res: RunMetrics) -> str:
    """The section's summary line: run, scenario, matrix point, repetition, health, Jain and utilisation."""
    record, r = run.record, res.run
    matrix = ", ".join(f"{k}={v}" for k, v in (record.matrix or {}).items())
    return (f"{esc(run.run_id)} — {esc(record.given('scenario', '?'))}"
            f"{' [' + esc(matrix) + ']' if matrix else ''} rep {esc(record.given('repetition', '?'))} "
            f"{_verdict_badge(run.checks)}{' ' + WALL_BADGE if is_wall_clock(run.record) else ''} "
            f"<span class='kv'>J={fmt(r.jain)}, "
            f"util={fmt(100 * r.utilisation, 1)} %</span>")


def _run_facts(run: Run) -> str:
    """Where the run is, how it ended, its kernel and its link."""
    record = run.record
    link = record.link or Link()
    kernel = record.kernel.release if record.kernel else None
    return (f"<p class='kv'>path <b>{esc(shown(run.path))}</b> · status <b>{esc(record.status)}</b> · "
            f"mode <b>{esc(record.mode)}</b> · kernel <b>{esc(kernel)}</b>"
            f" · link <b>{fmt(link.rate_mbps)} Mbit/s</b>, RTT <b>{fmt(link.rtt_ms)} ms</b>, "
            f"buffer <b>{fmt(link.buffer_bdp)} BDP</b> ({fmt(link.buffer_bytes)} B; BDP "
            f"{fmt(link.bdp_bytes)} B), loss <b>{fmt(link.loss_pct)} %</b> · duration "
            f"<b>{fmt(record.duration_s)} s</b> · started {esc(record.start_time)}</p>")


def _run_notes_html(run: Run, res: RunMetrics) -> str:
    notes = list(run.notes)
    if "qdisc" in run.tables and "queue" not in res.series:
        notes.append(NO_BOTTLENECK_NOTE)
    return "<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>" if notes else ""


def _health_html(run: Run) -> str:
    """The emulation-health checks (checks.json), a failed one marked."""
    ch = pd.DataFrame((run.checks or {}).get("checks") or [])
    if ch.empty:
        return ""
    ch = ch.reindex(columns=["name", "ok", "measured", "expected", "detail"])
    return (f"<h3>Emulation health {_verdict_badge(run.checks)}</h3>"
            + table(ch, left={"name", "detail"}, cls_rows=["" if ok else "reg" for ok in ch["ok"]]))


def _metrics_html(res: RunMetrics, opts: Options) -> str:
    r = res.run
    rm = pd.DataFrame([{"metric": m.label, "value": getattr(r, m.column), "unit": m.unit} for m in COMPARED])
    return ("<h3>Run metrics</h3>"
            f"<p class='note'>Steady-state window {fmt(r.steady_t0_s)}–{fmt(r.steady_t1_s)} s "
            f"(skip {opts.skip_s:g} s, until the first flow ends).</p>" + table(rm, left={"metric", "unit"}))


# The per-flow tables' headers (units included).
FLOW_HEADERS = {"rtt_ms": "RTT ms", "bytes": "bytes (receiver)", "mean_mbps": "mean Mbit/s",
                "steady_mbps": "steady Mbit/s", "steady_share": "steady share", "max_mbps_1s": "max Mbit/s (1 s)",
                "min_mbps_1s": "min Mbit/s (1 s)", "avg_mbps_1s": "avg Mbit/s (1 s)", "t_start": "start s",
                "t_end": "end s", "mean_cwnd_pkts": "mean cwnd (packets)", "mean_srtt_ms": "mean srtt ms",
                "min_rtt_ms": "min RTT ms", "mean_qdelay_ms": "srtt − min RTT ms"}


def _flow_tables(res: RunMetrics) -> str:
    """Per flow two tables, so that each fits a 1280 px window: what each flow got, then its window
    and delays; per cc group, when there are several."""
    out = []
    fl = pd.DataFrame(res.flows)
    if not fl.empty:
        out.append("<h3>Per flow</h3>")
        out.append(table(fl.reindex(columns=["flow", "cc", "rtt_ms", "bytes", "mean_mbps", "steady_mbps", "share",
                                             "steady_share", "retransmits", "max_mbps_1s", "min_mbps_1s",
                                             "avg_mbps_1s"]), left={"cc"}, headers=FLOW_HEADERS))
        out.append(table(fl.reindex(columns=["flow", "cc", "t_start", "t_end", "mean_cwnd_pkts", "mean_srtt_ms",
                                             "min_rtt_ms", "mean_qdelay_ms"]), left={"cc"}, headers=FLOW_HEADERS))
    if len(res.groups) > 1:
        out.append("<h3>Per CC group</h3>")
        out.append(table(pd.DataFrame([g.as_dict() for g in res.groups]), left={"cc"}))
    return "".join(out)


# The repetitions table's columns (so that it fits a 1280 px window): metric -> header with unit.
REPS_SHOWN = {"throughput_mbps": "throughput Mbit/s", "utilisation": "utilisation", "jain_steady": "Jain (steady)",
              "retransmits": "retransmits", "bottleneck_drops": "drops", "mean_queue_delay_ms": "queue delay ms",
              "p95_queue_delay_ms": "p95 queue delay ms", "mean_srtt_qdelay_ms": "srtt − min RTT ms",
              "short_rtt_flow_share": "short-RTT flow share"}


def _reps_section(page: Page, s: Summary) -> None:
    if s.reps.empty:
        return
    multi = s.reps[s.reps["runs"] > 1]
    if multi.empty:
        return
    page.h2("Repetitions: mean ± 95 % CI", "reps")
    page.add("<p class='note'>Runs identical except <code>repetition</code>; CI half-width from Student's t "
             "with n−1 degrees of freedom. The main metrics; every metric's mean, CI and n are in the "
             "report's .summary.json (repetition_groups).</p>")
    rows = []
    wall = set(s.runs.loc[s.runs["clock"] == "wall", "group"]) if "clock" in s.runs else set()
    for g, d in multi.groupby("group", sort=False):
        row = {"configuration": d["group_label"].iloc[0] + (" (wall clock)" if g in wall else ""),
               "algorithms": d["algos"].iloc[0],
               "n": int(d["runs"].iloc[0])}
        for rr in d.itertuples():
            if rr.metric in REPS_SHOWN and not (rr.metric == "short_rtt_flow_share" and rr.n == 0):
                row[REPS_SHOWN[rr.metric]] = fmt_ci(rr.mean, rr.ci95)
        rows.append(row)
    df = pd.DataFrame(rows)
    page.add(table(df, left=set(df.columns)))


def _sweep_section(page: Page, s: Summary, runs: list[Run]) -> None:
    if len(runs) < 2:
        return
    figs = sweep_figures(s, page_colors(runs))
    page.scope = "across-runs"
    page.h2("Across runs", "sweep")
    varying = [k for k in s.matrix_keys if s.runs.get(f"matrix.{k}") is not None
               and s.runs[f"matrix.{k}"].astype(str).nunique() > 1]
    page.add(f"<p class='kv'>{len(runs)} runs, {s.runs['group'].nunique()} configurations; matrix keys "
             f"varying: <b>{esc(', '.join(varying) or 'none')}</b>.</p>")
    if figs:
        page.add("".join(page.fig_html(f) for f in figs))
    else:
        page.add("<p class='note'>No across-runs figure applies: the runs whose emulation health is not "
                 "fail vary no matrix key, the flows' RTTs or the random loss rate.</p>")
    t = throughput_table(s)
    if not t.empty:
        paper = "tags" in s.runs and s.runs["tags"].fillna("").astype(str).str.contains(r"\bpaper-").any()
        page.add("<h3>Throughput per flow and congestion control (1 s intervals)</h3>"
                 "<p class='note'>Max/min/avg of 1 s intervals within each flow's active period (Mbit/s), "
                 "mean over repetitions" + ("; the layout of 003 Table 1" if paper else "") + ".</p>")
        fold = len(t) > 24
        page.add((f"<details><summary>{len(t)} rows (click to show)</summary>" if fold else "")
                 + table(t, left={"group_label", "cc"}, headers={
                     "group_label": "configuration", "max_mbps_1s": "max", "min_mbps_1s": "min",
                     "avg_mbps_1s": "avg"}) + ("</details>" if fold else ""))


def _runs_table(page: Page, s: Summary) -> None:
    cols = ["run_id", "group_label", "repetition", "algos", *LINK_SETTINGS,
            "aqm", "clock", "verdict", "throughput_mbps", "utilisation", "jain", "jain_steady", "retransmits",
            "bottleneck_drops", "mean_queue_delay_ms"]
    df = s.runs.reindex(columns=cols).copy()
    df["run_id"] = df["run_id"].astype(str)
    page.add(table(df, left={"run_id", "group_label", "algos", "aqm", "clock", "verdict"}, cls_rows=[
        "wallclock" if c == "wall" else "" for c in df["clock"]], headers={
        "group_label": "configuration",
        "throughput_mbps": "Mbit/s", "mean_queue_delay_ms": "queue delay ms", "jain_steady": "jain steady",
        "bottleneck_drops": "drops", "verdict": "health"}))


@dataclass
class _Analysis:
    """Everything the page shows: the runs, their metrics, the summary and the judgements."""
    runs: list[Run]
    results: list[RunMetrics]
    summary: Summary
    cmp: pd.DataFrame | None
    verdicts: list[Verdict]
    claim_notes: list[str]
    sides: tuple[Summary, Summary] | None = None  # baseline's and candidate's summaries


def write_report(paths: Sequence[Path | str], output: Path, opts: Options, *,
                 compare_paths: tuple[Path, Path] | None = None, threshold_pct: float = 5.0,
                 claims: Claims | None = None) -> Result:
    """Load, analyse and judge the runs (with `claims`, default: those recorded with them), then
    write the page (sections in order) and its files."""
    output = Path(output)
    check_report_outputs(paths, output, opts, compare_paths)
    skipped: list[str] = []
    a = _analyse_all(paths, opts, compare_paths, threshold_pct, skipped, claims or Claims(None))
    page = _new_page(a, opts)
    warnings = _skipped_section(page, skipped) + _run_notes(a.runs) + list(a.claim_notes)
    records = sum(run.recorded is not None for run in a.runs)
    if records:
        warnings.append(f"{records} {RECORD_NOTE}")
        page.add(f"<p class='note'>{records} {esc(RECORD_NOTE)}.</p>")
    if a.verdicts or a.claim_notes:
        claims_section(page, a.verdicts, a.claim_notes)
    regressions = _compare_section(page, a, compare_paths, threshold_pct, warnings)
    _sweep_section(page, a.summary, a.runs)
    _reps_section(page, a.summary)
    _overview_section(page, a.summary, a.runs)
    _per_run_sections(page, a.runs, a.results, opts)
    csv_path, json_path, claims_path = _write_files(page, output, a, opts, compare_paths, threshold_pct,
                                                    regressions)
    exported = []
    if opts.figures_dir is not None:
        from .export import export_figures

        exported = export_figures(page.fig_objects, Path(opts.figures_dir), opts.figures_format)
    return Result(output, csv_path, json_path, len(a.runs), len(page.figs), regressions, a.cmp, warnings,
                  a.verdicts, claims_path, exported)


def check_report_outputs(paths: Sequence[Path | str], output: Path, opts: Options,
                         compare_paths: tuple[Path, Path] | None = None) -> None:
    """Before anything is read or written: the page and its companions go to regular files of their
    own, outside the runs; so does the --figures folder."""
    runs = run_dirs_of(list(compare_paths or paths))
    atomic.check_outputs([(output, "the report"), (companion(output, "summary.csv"), "its summary.csv"),
                          (companion(output, "summary.json"), "its summary.json"),
                          (companion(output, "claims.json"), "its claims.json")], run_dirs=runs)
    if opts.figures_dir is not None:
        figures = Path(opts.figures_dir)
        if os.path.lexists(figures) and (figures.is_symlink() or not figures.is_dir()):
            raise ReportInputError(f"--figures {figures}: not a directory; the figures go in a folder of their own")
        real = figures.resolve()
        run = next((r for r in runs if real == r.resolve() or r.resolve() in real.parents), None)
        if run is not None:
            raise ReportInputError(f"--figures {figures}: inside the run directory {run}; the figures go "
                                   "outside the runs they are made from")


def _analyse_all(paths: Sequence[Path | str], opts: Options, compare_paths: tuple[Path, Path] | None,
                 threshold_pct: float, skipped: list[str],
                 claims: Claims) -> _Analysis:
    """Metrics of every run; with compare_paths, both sides, their comparison, and the claims
    judged on the candidate (it must bear them out)."""
    if not compare_paths:
        runs, results, summary = analyse(load_runs(paths, skipped), opts, skipped)
        verdicts, notes = judge_claims(runs, results, claims=claims)
        return _Analysis(runs, results, summary, None, verdicts, notes)
    base_runs, cand_runs = load_runs([compare_paths[0]], skipped), load_runs([compare_paths[1]], skipped)
    base_runs, base_res, base_s = analyse(base_runs, opts, skipped)
    cand_runs, cand_res, cand_s = analyse(cand_runs, opts, skipped)
    for r in base_runs:
        r.side = "baseline"
    for r in cand_runs:
        r.side = "candidate"
    runs, results = base_runs + cand_runs, base_res + cand_res
    verdicts, notes = judge_claims(cand_runs, cand_res, claims=claims)
    return _Analysis(runs, results, summarize(runs, results), compare(base_s, cand_s, threshold_pct),
                     verdicts, notes, (base_s, cand_s))


def _new_page(a: _Analysis, opts: Options) -> Page:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = opts.title or ("cctest comparison" if a.cmp is not None else "cctest report")
    scen = sorted({str(r.record.scenario) for r in a.runs})
    return Page(title, f"{len(a.runs)} run(s) of {', '.join(scen)} · generated {now} · bin {_bin_text(opts)} · "
                       f"steady state after {opts.skip_s:g} s · Jain window {opts.jain_window_s:g} s")


def _skipped_section(page: Page, skipped: list[str]) -> list[str]:
    if skipped:
        page.h2("Runs not shown", "skipped")
        page.add("<ul class='notes'>" + "".join(f"<li>{esc(w)}</li>" for w in skipped) + "</ul>")
    return list(skipped)


def _run_notes(runs: list[Run]) -> list[str]:
    """Every note of every run also reaches the terminal: a report is often read there only."""
    return [f"{shown(run.path)}: {note}" for run in runs for note in run.notes]


def _compare_section(page: Page, a: _Analysis, compare_paths: tuple[Path, Path] | None, threshold_pct: float,
                     warnings: list[str]) -> int:
    """The baseline-vs-candidate table; returns the number of regressions."""
    cmp = a.cmp
    if cmp is None:
        return 0
    assert compare_paths is not None  # a.cmp is made only with compare_paths
    page.h2("Comparison", "compare")
    page.add(f"<p class='kv'>baseline <b>{esc(compare_paths[0])}</b> vs candidate "
             f"<b>{esc(compare_paths[1])}</b>; regression = change in the worse direction by more than "
             f"<b>{threshold_pct:g} %</b> of the baseline mean.</p>")
    assert a.sides is not None  # analysed with the comparison
    ub, uc = unmatched_groups(*a.sides)
    unmatched = ([f"baseline configuration without candidate: {g}" for g in ub]
                 + [f"candidate configuration without baseline: {g}" for g in uc])
    warnings += unmatched
    if unmatched:
        page.add("<ul class='notes'>" + "".join(f"<li>{esc(w)}</li>" for w in unmatched) + "</ul>")
    if cmp.empty:
        warnings.append("no configuration present on both sides: nothing compared")
        page.add("<p class='bad'>No configuration present on both sides.</p>")
        return 0
    regressions = int(cmp["regression"].sum())
    page.add(f"<p class='{'bad' if regressions else 'ok'}'>{regressions} regression(s).</p>")
    page.add("<p class='note'>± CI: 95 % Student-t half-width over repetitions; significant: the "
             "difference exceeds the two half-widths combined (informational; only the threshold "
             "decides a regression).</p>")
    show = cmp[["group", "label", "better", "n_baseline", "baseline", "baseline_ci95", "n_candidate",
                "candidate", "candidate_ci95", "delta", "delta_pct", "significant", "regression"]]
    page.add(table(show, left={"group", "label", "better"}, cls_rows=[
        "reg" if x else "" for x in cmp["regression"]], headers={
        "group": "configuration", "label": "metric", "baseline_ci95": "± CI", "candidate_ci95": "± CI ",
        "n_baseline": "n", "n_candidate": "n ",
        "delta_pct": "Δ %", "delta": "Δ"}))
    return regressions


def _overview_section(page: Page, summary: Summary, runs: list[Run]) -> None:
    page.h2("Runs overview", "overview")
    if len(runs) > MANY_RUNS:
        page.add(f"<details><summary>{len(runs)} runs (click to show the table)</summary>")
    _runs_table(page, summary)
    if len(runs) > MANY_RUNS:
        page.add("</details>")


def _per_run_sections(page: Page, runs: list[Run], results: list[RunMetrics], opts: Options) -> None:
    page.h2("Per run", "runs")
    # Many runs: fewer display points per trace so the page stays small (metrics are unaffected).
    per_run = opts
    if len(runs) > MANY_RUNS:
        per_run = Options(**{**opts.__dict__, "max_points": max(MIN_POINTS_MANY,
                                                                 opts.max_points * MANY_RUNS // len(runs))})
    if len(runs) > 1:
        page.add("<p class='note'>Click a run to expand it; figures render when they scroll into view"
                 + (f"; traces show at most {per_run.max_points} points each" if per_run is not opts else "")
                 + ".</p>")
    colors = page_colors(runs)
    for i, (run, res) in enumerate(zip(runs, results, strict=True)):
        _run_section(page, run, res, per_run, open_=(i == 0), index=i, colors=colors)


def companion(output: Path, kind: str) -> Path:
    """A file written with the report, named after it: a.html -> a.summary.csv, a.summary.json,
    a.claims.json; so two reports in one directory never overwrite each other's."""
    return output.with_name(f"{output.stem}.{kind}")


def _write_files(page: Page, output: Path, a: _Analysis, opts: Options, compare_paths: tuple[Path, Path] | None,
                 threshold_pct: float, regressions: int) -> tuple[Path, Path, Path | None]:
    """The page, and beside it <stem>.summary.csv, <stem>.summary.json and (with claims) <stem>.claims.json."""
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(output, page.render(), errors="replace")
    csv_path, json_path = companion(output, "summary.csv"), companion(output, "summary.json")
    atomic.write_text(csv_path, spreadsheet_safe(summary_frame(a.summary)).to_csv(index=False), errors="replace")
    js = summary_json(a.summary, opts.as_dict())
    if a.cmp is not None:
        assert compare_paths is not None  # a.cmp is made only with compare_paths
        js["compare"] = {"baseline": str(compare_paths[0]), "candidate": str(compare_paths[1]),
                         "threshold_pct": threshold_pct, "regressions": regressions,
                         "rows": json.loads(a.cmp.to_json(orient="records")) if not a.cmp.empty else []}
    atomic.write_text(json_path, jsonsafe.dumps(js, indent=1, default=str))
    claims_path = None
    if a.verdicts or a.claim_notes:
        claims_path = companion(output, "claims.json")
        atomic.write_text(claims_path, jsonsafe.dumps(claims_json(a.verdicts, a.claim_notes), indent=1))
    return csv_path, json_path, claims_path
