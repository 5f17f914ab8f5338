"""The report's figures obey the link, and the report, metrics and health checks give one answer
per question, on real recorded runs (tests/fixtures/runs, made by `cctest run` in the VM).

The figures are read back from the page's plotly JSON, as a browser would get them."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cctest.analysis import checks, derived as D, metrics as M
from cctest.analysis.load import load_run
from cctest.model.record import Link
from cctest.report.build import Options, write_report
from tests import REPO

RUNS = REPO / "tests" / "fixtures" / "runs"
DEMO = RUNS / "demo-cubic-bbr-20261122-232527-base-r0"
REAL = sorted(p.parent for p in RUNS.glob("*/meta.json"))


# How far a sampled counter's bin can read above the link, from the measurement alone: the
# tolerance the figures are held to.


def sample_jitter_s(t) -> float:
    """Spread (standard deviation) of a sampler's intervals: how uncertain each sample's place in
    time is (a late or slow read shows as an irregular interval)."""
    d = np.diff(np.sort(np.asarray(t, dtype=float)))
    return float(np.std(d)) if d.size > 1 else 0.0


def bin_quantum_bytes(link: Link, sample_t, t: float) -> float:
    """How far one bin of a sampled byte counter can read above what the link carried, from the
    measurement alone: one frame at each bin edge (the counter moves in whole packets) plus what
    the link carries in the samples' timing uncertainty at both edges."""
    return 2 * D.frame_bytes(link) + 2 * D.link_rate_mbps_at(link, t) * 1e6 / 8 * sample_jitter_s(sample_t)


def _array(v) -> np.ndarray:
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).astype(float)
    return np.asarray([np.nan if x is None else x for x in v], dtype=float)


def page_figures(html: str) -> dict[str, dict]:
    """The page's figures by key, their traces' x and y as arrays."""
    figs = json.loads(re.search(r"id='cctest-figs'>(.*?)</script>", html, re.S).group(1).replace("\\u003c", "<"))
    out = {}
    for i, key in re.findall(r"data-fig='(\d+)' data-key='([^']*)'", html):
        f = figs[int(i)]
        out[key] = {"traces": {t.get("name"): (_array(t["x"]), _array(t["y"])) for t in f["data"]},
                    "fig": f}
    return out


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "report.html"
    write_report([DEMO], out, Options())
    return page_figures(out.read_text()), json.loads((out.parent / "report.summary.json").read_text())


def test_aggregate_never_exceeds_the_link_by_more_than_a_bins_quantisation(demo_page):
    figs, _ = demo_page
    run = load_run(DEMO)
    recorded = run.record.link
    assert recorded is not None
    bin_s = D.default_bin_s(run.record)
    x, y = figs["throughput"]["traces"]["aggregate (bottleneck sent)"]
    assert len(x) >= 0.9 * 20 / bin_s  # every bin of the 20 s run is drawn
    bq = D.bottleneck_samples(run.tables["qdisc"])
    bin_start = x - bin_s
    link = np.array([D.link_bytes_between(recorded, t, t + bin_s) for t in bin_start])
    quantum = np.array([bin_quantum_bytes(recorded, bq["t_s"], t) for t in bin_start])
    got = y * 1e6 / 8 * bin_s
    worst = int(np.argmax(got - link - quantum))
    assert (got <= link + quantum + 1).all(), (
        f"bin at {bin_start[worst]:.1f} s: {y[worst]:.2f} Mbit/s, link {link[worst] * 8 / bin_s / 1e6:g} "
        f"+ quantum {quantum[worst]:.0f} B")
    # and the link was full: the busiest bins are at its rate, not far below
    assert np.percentile(y, 90) >= 0.9 * D.link_rate_mbps_at(recorded, 10.0)
    # per flow: never above the link (the sender-interval bug drew 37.6 and 47.1 Mbit/s here)
    for name, (_, fy) in figs["throughput"]["traces"].items():
        if name.startswith("flow"):
            assert np.nanmax(fy) <= D.link_rate_mbps_at(recorded, 0.0) * 1.0 + quantum.max() * 8 / bin_s / 1e6


def test_utilisation_figure_stays_within_the_link(demo_page):
    figs, _ = demo_page
    run = load_run(DEMO)
    bq = D.bottleneck_samples(run.tables["qdisc"])
    bin_s = D.default_bin_s(run.record)
    link = run.record.link
    assert link is not None
    (_, util), = figs["utilisation"]["traces"].values()
    slack = bin_quantum_bytes(link, bq["t_s"], 0.0) / D.link_bytes_between(link, 0, bin_s)
    assert np.nanmax(util) <= 100 * (1 + slack)
    assert np.nanmax(util) >= 90  # the figure is the link's, not a fraction of it


def test_queue_plots_every_sample_at_its_true_time(demo_page):
    figs, _ = demo_page
    run = load_run(DEMO)
    bq = D.bottleneck_samples(run.tables["qdisc"])
    x, _ = figs["queue"]["traces"]["backlog"]
    shown = x[~np.isnan(x)]
    in_run = bq[(bq["t_s"] >= 0) & (bq["t_s"] <= 20 + M.RUN_TAIL_S)]["t_s"].to_numpy()
    assert len(shown) >= len(in_run)  # ~10 per second at the 100 ms interval, not ~30 in all
    assert np.allclose(shown[(shown >= 0) & (shown <= 21)], in_run.astype(np.float32), atol=1e-4)


def test_sampling_gaps_break_the_line():
    from cctest.report.run_figures import _with_gaps
    t = np.array([0.0, 0.1, 0.2, 1.2, 1.3])
    x, y = _with_gaps(t, t * 2, 0.1)
    assert np.isnan(x[3]) and np.isnan(y[3]) and len(x) == 6


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name[:30])
def test_drops_and_fullness_have_one_answer(path, tmp_path):
    """The report's overview, its metrics and checks.json agree on drops and link fullness."""
    run = load_run(path)
    ev = checks.evaluate(run.record, run.tables)
    by = {c["name"]: c for c in ev["checks"]}
    res = M.run_metrics(run.record, run.tables)
    assert res.run.bottleneck_drops == by["bottleneck_drops"]["measured"]
    assert res.run.utilisation == pytest.approx(by["goodput"]["measured"], abs=1e-4)
    out = tmp_path / "r.html"
    write_report([path], out, Options())
    summary = pd.read_csv(out.parent / "r.summary.csv")
    assert summary["bottleneck_drops"].iloc[0] == by["bottleneck_drops"]["measured"]


WALL = RUNS / "wallclock-three-v-three-20261122-232144-ratembps-20.0-r0"


def test_a_starved_sampler_is_shown_as_such(tmp_path):
    """Under the wall clock with six flows the qdisc sampler managed ~1.4 samples/s instead of 10:
    the queue figure shows exactly those samples at their times, broken at the gaps, and says so."""
    out = tmp_path / "r.html"
    write_report([WALL], out, Options())
    html = out.read_text()
    figs = page_figures(html)
    bq = D.bottleneck_samples(load_run(WALL).tables["qdisc"])
    x, _ = figs["queue"]["traces"]["backlog"]
    gaps = int(np.isnan(x).sum())
    run = load_run(WALL)
    spans = D.flow_spans(run.record.flows or [], run.tables["flows"], run.tables["throughput"])
    in_run = bq[(bq["t_s"] >= min(0.0, spans["t_start"].min()))
                & (bq["t_s"] <= spans["t_end"].max() + M.RUN_TAIL_S)]
    assert len(x) - gaps == len(in_run) and gaps >= 1
    assert "markers" in figs["queue"]["fig"]["data"][0]["mode"]  # lone samples stay visible
    assert "the sampler was late" in html
    assert "the sampler was late" not in write_and_read(DEMO, tmp_path / "d.html")


def write_and_read(path: Path, out: Path) -> str:
    write_report([path], out, Options())
    return out.read_text()


def test_the_link_rate_line_follows_a_rate_schedule():
    """A link.rate_schedule draws the rate as steps at the schedule's times, not one line at the
    starting rate (which would make every bin after a step look under-used)."""
    import plotly.graph_objects as go

    from cctest.model.record import RunRecord
    from cctest.report import run_figures

    link = {"rate_mbps": 20, "rate_schedule": [{"at_s": 6, "rate_mbps": 10}, {"at_s": 9, "rate_mbps": 15}]}
    view = run_figures._RunView.__new__(run_figures._RunView)
    view.record = RunRecord.model_validate({"link": link, "flows": [{"start_s": 1, "duration_s": 12}]})
    view.link = Link.model_validate(link)
    fig = go.Figure()
    view.link_rate_line(fig)
    (line,) = fig.data
    assert list(line.x) == [0, 6, 9, 13] and list(line.y) == [20, 10, 15, 15] and line.line.shape == "hv"
    steady = go.Figure()
    view.link = Link(rate_mbps=20)
    view.link_rate_line(steady)
    assert not steady.data and steady.layout.shapes[0].y0 == 20


def test_outages_are_shaded_where_the_link_delivered_nothing(tmp_path):
    """Each link.outages span is a band on the run's time axes (throughput among them)."""
    src = RUNS / "core-vs-kernel-50-20261123-073134-f0.cc-bbr-r0"
    run = tmp_path / src.name
    shutil.copytree(src, run)
    meta = json.loads((run / "meta.json").read_text())
    meta["link"]["outages"] = [{"at_s": 5, "duration_s": 1}]
    (run / "meta.json").write_text(json.dumps(meta))
    html = write_and_read(run, tmp_path / "report.html")
    bands = re.findall(r'"type":"rect"[^{}]*"x0":5[,.][^{}]*"x1":6[,.}]', html)
    assert len(bands) >= 3, f"{len(bands)} outage bands"  # throughput, utilisation, cwnd, ...
    assert '"text":"outage"' in html
