"""The lists the docs keep by hand, against the registries they describe: the AQMs and their
parameters (cctest/model/aqm.py), the congestion controls (the kernel's and the Kbuild files') and
the paper suites (the suite files experiments.yaml includes). Adding one fails here, naming the page,
until the page says it. The lists made from a registry (the claim language's terms, from
cctest/model/metric_table.py; the capture options, from scenario.CaptureSettings) fail here while
stale: scripts/doc-lists.py makes them anew. (The run directory's tables, columns and raw files are
checked in tests/unit/test_captures.py, the report's columns in tests/unit/test_report_files.py.)"""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from cctest.model import aqm, metric_table
from cctest.model.scenario import load_experiments
from tests import REPO

EXPERIMENTS_MD = (REPO / "docs" / "experiments.md").read_text()
PAPERS_MD = (REPO / "docs" / "papers.md").read_text()


def flat(text: str) -> str:
    return " ".join(text.split())


def made_lists():
    """scripts/doc-lists.py, as a module."""
    spec = importlib.util.spec_from_file_location("doc_lists", REPO / "scripts" / "doc-lists.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


MADE = made_lists()


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
                assert default == MADE.shown(fields[name].default), f"docs/experiments.md: {kind} {name} ({default})"


def test_the_aqm_parsers_see_an_edit():
    assert "pie" not in documented_aqms(EXPERIMENTS_MD.replace(" | pie", ""))
    edited = EXPERIMENTS_MD.replace("`flows` (1024)", "`flows` (2048)")
    assert ("flows", "2048") in documented_aqm_params(edited)["fq_codel"]


@pytest.mark.parametrize("name", MADE.LISTS)
def test_each_made_list_is_the_registrys_as_it_is(name):
    page = MADE.LISTS[name].page
    text = (REPO / page).read_text()
    assert MADE.with_list(text, name) == text, f"{page}: the {name} are stale; run scripts/doc-lists.py"


def test_the_claim_terms_are_every_term_of_the_metric_table():
    rows = re.findall(r"^\| `([^`]+)` \|", MADE.claim_terms(), re.M)
    assert rows == [*metric_table.RUN_TERMS, *(f"{term}(cc)" for term in metric_table.CC_TERMS)]
    steady = re.findall(r"^\| `([^`]+)` \|.*\| yes \|$", MADE.claim_terms(), re.M)
    assert steady == [*metric_table.STEADY_RUN_TERMS, *(f"{t}(cc)" for t in metric_table.STEADY_CC_TERMS)]


def test_the_capture_options_are_every_option_with_its_default():
    assert MADE.capture_options() == "{ss_interval_ms: 100, qdisc_interval_ms: 100, tcp_probe: true, pcap: false}"


@pytest.mark.parametrize("edit", [("| `jain` |", "| `fairness` |"), ("tcp_probe: true,", "tcp_probe: false,")])
def test_a_made_list_sees_an_edit_and_its_place_gone(edit):
    text = (REPO / "docs" / "experiments.md").read_text()
    edited = text.replace(*edit)
    assert edited != text and MADE.with_list(MADE.with_list(edited, "claim terms"), "capture options") == text
    with pytest.raises(ValueError, match="no place for the claim terms"):
        MADE.with_list(text.replace("<!-- end of the claim terms -->", ""), "claim terms")


def test_papers_md_has_a_row_per_suite():
    for tag, suite in load_experiments(REPO / "experiments.yaml").suites.items():
        assert f"| `{tag}` |" in PAPERS_MD, f"docs/papers.md: no scenario row of {tag} ({suite.title})"


def test_the_congestion_controls_are_the_kernels_and_the_kbuild_files():
    from cctest.kernel.projectccs import KERNEL_CCS, PROJECT_CCS

    listed = re.search(r"`cc` is one of the kernel's `([^`]*)` or this project's `([^`]*)`", flat(EXPERIMENTS_MD))
    assert listed, "docs/experiments.md: the list of congestion controls"
    assert sorted(listed.group(1).split()) == sorted(KERNEL_CCS), "docs/experiments.md: the kernel's ccs"
    assert sorted(listed.group(2).split()) == sorted(PROJECT_CCS), "docs/experiments.md: this project's modules"
