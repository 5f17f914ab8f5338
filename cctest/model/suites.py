"""Paper suites: one file per seed paper, included by the experiments file.

A suite file opens with `suite: {tag, title}` (and, optionally, `readings:`, the tables that set a
variant's readings side by side), then holds its `scenarios:`. The tag (`paper-NNN`)
marks the scenarios at the paper's own scale, and their scaled-down copies carry `quick-NNN`; the
title heads the paper's section of docs/reproduction.md. A suite file is named after its tag
(suites/paper-005.yaml). The experiments file lists its suite files under `include:`, as paths
relative to its own folder and inside it, or a folder of them: every suite file in it, in name
order, which is the papers' order.

Pure checks only: scenario.py reads the files and turns each refusal here into one line naming the
file and the key.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator, model_validator

from ..base.strict import Strict
from . import claim_language

SUITE_TAG = r"paper-\d{3}"  # the reproduction page and the claims' score read this form
MAX_INCLUDES = 32  # suite files per experiments file: a paper each, with room to grow


Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200, pattern=r"^[^\n]*$")]
Line = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=120, pattern=r"^[^\n]*$")]


CC_PLACEHOLDER = "CC"  # in a readings row's term: the column's congestion control


def with_cc(term: str, cc: str) -> str:
    """A readings row's term for one column: CC (a whole word) replaced by that column's control."""
    return re.sub(rf"\b{CC_PLACEHOLDER}\b", cc, term)


class ReadingColumn(Strict):
    """One reading of a variant (or its baseline): the runs of a scenario at some of its points, and
    the congestion control its rows' terms name."""

    label: Line
    scenario: Line
    where: dict[str, Any] = Field(default_factory=dict)  # matrix key -> value or values
    cc: Line


class ReadingRow(Strict):
    """One measure across the columns: a term of the claim language (CC standing for each column's
    congestion control), at some matrix points, and the paper's own value as it states it."""

    label: Line
    term: Line
    where: dict[str, Any] = Field(default_factory=dict)
    paper: str = Field(default="", max_length=80)


class Readings(Strict):
    """A table of docs/reproduction.md: the same measures over a variant's readings and its baseline
    (the specification's open choices side by side), each cell the mean of the declared runs."""

    title: Title
    columns: list[ReadingColumn] = Field(min_length=2, max_length=8)
    rows: list[ReadingRow] = Field(min_length=1, max_length=12)

    @model_validator(mode="after")
    def terms_parse(self) -> Readings:
        for k, row in enumerate(self.rows):
            for column in self.columns:
                try:
                    claim_language.parse(f"{with_cc(row.term, column.cc)} > 0")
                except claim_language.ClaimError as error:
                    raise ValueError(f"rows[{k}].term {row.term!r} (for {column.label}, CC = {column.cc}): "
                                     f"{error}") from None
        return self


class Suite(Strict):
    """A paper suite's header: the tag its paper-scale scenarios carry, the paper's title, and the
    tables of readings its page shows."""

    tag: str
    title: Title
    readings: list[Readings] = Field(default_factory=list, max_length=8)

    @field_validator("tag")
    @classmethod
    def paper_tag(cls, tag: str) -> str:
        if not re.fullmatch(SUITE_TAG, tag):
            raise ValueError(f"{tag!r} is no suite tag; a suite tag is paper-NNN (three digits), e.g. paper-005")
        return tag

    @property
    def quick_tag(self) -> str:
        """The tag of the suite's scaled-down copies, outside the score."""
        return self.tag.replace("paper-", "quick-", 1)

    def owns(self, tag: str) -> bool:
        return tag in (self.tag, self.quick_tag)


def suite_tag_of(tag: str) -> str | None:
    """The suite tag a scenario tag belongs to (paper-NNN for paper-NNN, quick-NNN and reading-NNN),
    else None."""
    match = re.fullmatch(r"(?:paper|quick|reading)-(\d{3})", tag)
    return f"paper-{match.group(1)}" if match else None


def include_path(entry: object, folder: Path) -> Path:
    """The file an `include:` entry names: a relative path inside `folder` (the experiments file's),
    symbolic links resolved. ValueError, saying what is allowed, for anything else."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"{entry!r}: an entry is a file's path relative to the experiments file, "
                         "e.g. suites/paper-000.yaml")
    if PurePosixPath(entry).is_absolute() or Path(entry).is_absolute():
        raise ValueError(f"{entry}: an absolute path; name the file relative to the experiments file's folder")
    root = folder.resolve()
    target = (root / entry).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"{entry}: outside the experiments file's folder ({root}); the suites live beside it "
                         "(a VM guest sees that folder only)")
    return target


def folder_entries(entry: str, folder: Path) -> list[str]:
    """The entries an `include:` entry naming a folder stands for, in name order: one per `*.yaml`
    file in it. ValueError for a folder with none, or with more than MAX_INCLUDES."""
    names = []
    for child in folder.iterdir():
        if child.name.endswith(".yaml") and not child.name.startswith("."):
            names.append(child.name)
            if len(names) > MAX_INCLUDES:
                raise ValueError(f"{entry}: a folder of more than {MAX_INCLUDES} suite files")
    if not names:
        raise ValueError(f"{entry}: a folder without a suite file (*.yaml) in it")
    return [f"{entry.rstrip('/')}/{name}" for name in sorted(names)]


def check_file_name(suite: Suite, entry: str) -> None:
    """A suite file is named after its tag. ValueError otherwise."""
    name = PurePosixPath(entry).name
    if name != f"{suite.tag}.yaml":
        raise ValueError(f"suite.tag: {suite.tag} in a file named {name}; a suite file is named after its tag "
                         f"({suite.tag}.yaml), so that a folder of them reads in the papers' order")


def check_suite_tags(suite: Suite, tags_by_scenario: dict[str, list[str]]) -> None:
    """A suite's scenarios: at least one carries its tag. ValueError otherwise."""
    if not any(suite.tag in tags for tags in tags_by_scenario.values()):
        raise ValueError(f"suite.tag: no scenario of the file carries {suite.tag}; tag its paper-scale "
                         f"scenarios {suite.tag} (scaled-down copies {suite.quick_tag})")

