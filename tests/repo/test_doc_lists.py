"""The lists the docs keep by hand, against the registries they describe: the AQMs and their
parameters (cctest/model/aqm.py), the capture options (scenario.CaptureSettings), the congestion
controls (the kernel's and the Kbuild files'), the claim language's terms
(cctest/model/metric_table.py) and the paper suites (the suite files experiments.yaml includes).
Adding one fails here, naming the page, until the page says it. (The run directory's tables,
columns and raw files are checked in tests/unit/test_captures.py, the report's columns in
tests/unit/test_report_files.py.)"""

from __future__ import annotations

import re

from cctest.model import aqm, metric_table
from cctest.model.scenario import CaptureSettings, load_experiments
from tests import REPO

EXPERIMENTS_MD = (REPO / "docs" / "experiments.md").read_text()
PAPERS_MD = (REPO / "docs" / "papers.md").read_text()


def flat(text: str) -> str:
    return " ".join(text.split())


def shown(value: object) -> str:
    """A default as the pages write it: 5 for 5.0, true for True."""
    return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def documented_aqms(doc: str = EXPERIMENTS_MD) -> list[str]:
    """The reference's `aqm:` line: `fifo (default) | fq_codel | ...`."""
    line = re.search(r"aqm: \w+ +# bottleneck queue: (.*)", doc)
    assert line, "docs/experiments.md: no `aqm:` line in the reference"
    return [kind.replace("(default)", "").strip() for kind in line.group(1).split("|")]


def documented_aqm_params(doc: str = EXPERIMENTS_MD) -> dict[str, list[tuple[str, str | None]]]:
    """'`aqm_params` per aqm (...): fq_codel `target_ms` (5), ...; codel ...' -> per kind, its
    parameters in order, each with the default the page gives (None where it gives none)."""
    text = flat(doc.split("`aqm_params` per aqm", 1)[1])
    text = re.sub(r"\([^()]*\s[^()]*\)", "", text)  # notes (with spaces), not defaults like (0.1)
    text = re.split(r"\.\s", text.split(":", 1)[1], maxsplit=1)[0]
    out = {}
    for part in text.split(";"):
        kind, _, rest = part.strip().partition(" ")
        out[kind] = re.findall(r"`(\w+)`(?: \(([^()\s]+)\))?", rest)
        out[kind] = [(name, default or None) for name, default in out[kind]]
    return out


def test_the_experiments_reference_lists_every_aqm():
    assert documented_aqms() == list(aqm.AQMS), "docs/experiments.md's aqm: line"


def test_every_aqms_parameters_and_defaults_are_documented():
    documented = documented_aqm_params()
    with_params = [kind for kind, a in aqm.REGISTRY.items() if a.params.model_fields]
    assert list(documented) == with_params, "docs/experiments.md, aqm_params: the AQMs with parameters"
    for kind, params in documented.items():
        fields = aqm.REGISTRY[kind].params.model_fields
        assert [name for name, _ in params] == list(fields), f"docs/experiments.md, aqm_params of {kind}"
        for name, default in params:
            if default is not None:
                assert default == shown(fields[name].default), f"docs/experiments.md: {kind} {name} ({default})"


def test_the_aqm_parsers_see_an_edit():
    assert "pie" not in documented_aqms(EXPERIMENTS_MD.replace(" | pie", ""))
    edited = EXPERIMENTS_MD.replace("`flows` (1024)", "`flows` (2048)")
    assert ("flows", "2048") in documented_aqm_params(edited)["fq_codel"]


def test_the_capture_options_are_capture_settings():
    line = re.search(r"^ +capture: \{(.*)\}", EXPERIMENTS_MD, re.M)
    assert line, "docs/experiments.md: no capture: line in the reference"
    documented = dict(item.split(": ") for item in line.group(1).split(", "))
    defaults = {name: shown(field.default) for name, field in CaptureSettings.model_fields.items()}
    assert documented == defaults, "docs/experiments.md's capture: line (every option, its default)"


def documented_terms(doc: str = EXPERIMENTS_MD) -> tuple[list[str], list[str], list[str]]:
    """The claim language's run metrics, per-cc metrics and steady-state terms as the page lists them."""
    text = flat(doc)
    run = re.search(r"run metrics `([^`]*)`", text)
    per_cc = re.search(r"per congestion control `([^`]*)`", text)
    steady = re.search(r"steady-state term \(((?:[^()]|\([^()]*\))*)\)", text)  # its terms hold (cc)
    assert run and per_cc and steady, "docs/experiments.md: the claim language's lists"
    return run.group(1).split(), per_cc.group(1).split(), re.findall(r"`([^`]+)`", steady.group(1))


def test_the_claim_language_lists_every_metric_term():
    run, per_cc, steady = documented_terms()
    assert sorted(run) == sorted(metric_table.RUN_TERMS), "docs/experiments.md: run metrics"
    assert sorted(per_cc) == sorted(f"{term}(cc)" for term in metric_table.CC_TERMS), \
        "docs/experiments.md: per congestion control"
    steady_terms = [*metric_table.STEADY_RUN_TERMS, *(f"{t}(cc)" for t in metric_table.STEADY_CC_TERMS)]
    assert sorted(steady) == sorted(steady_terms), "docs/experiments.md: steady-state terms"


def test_papers_md_has_a_row_per_suite():
    for tag, suite in load_experiments(REPO / "experiments.yaml").suites.items():
        assert f"| `{tag}` |" in PAPERS_MD, f"docs/papers.md: no scenario row of {tag} ({suite.title})"


def test_the_congestion_controls_are_the_kernels_and_the_kbuild_files():
    from cctest.kernel.projectccs import KERNEL_CCS, PROJECT_CCS

    listed = re.search(r"`cc` is one of the kernel's `([^`]*)` or this project's `([^`]*)`", flat(EXPERIMENTS_MD))
    assert listed, "docs/experiments.md: the list of congestion controls"
    assert sorted(listed.group(1).split()) == sorted(KERNEL_CCS), "docs/experiments.md: the kernel's ccs"
    assert sorted(listed.group(2).split()) == sorted(PROJECT_CCS), "docs/experiments.md: this project's modules"
