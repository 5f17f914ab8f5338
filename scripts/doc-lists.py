#!/usr/bin/env python3
"""The lists the docs carry that are made from the registries they describe: in docs/experiments.md,
the claim language's terms (between their markers, from cctest/model/metric_table.py) and the
reference's `capture:` line (every capture option with its default, from scenario.CaptureSettings).
Rewrites each in place; tests/repo/test_doc_lists.py fails while one is stale.

Usage: .venv/bin/python scripts/doc-lists.py
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cctest.model.metric_table import CC_METRICS, RUN_METRICS
from cctest.model.scenario import CaptureSettings

REPO = Path(__file__).resolve().parent.parent


def shown(value: object) -> str:
    """A value as the pages write it: 5 for 5.0, true for True."""
    return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def claim_terms() -> str:
    """A row per term a claim can name: a run's metrics as they are, a congestion control's as term(cc)."""
    rows = [(m.term, m) for m in RUN_METRICS if m.term] + [(f"{m.term}(cc)", m) for m in CC_METRICS if m.term]
    return "".join(f"{line}\n" for line in ["| term | what it measures | steady state |", "|---|---|---|",
                   *(f"| `{term}` | {m.meaning} | {'yes' if m.steady else ''} |" for term, m in rows)])


def capture_options() -> str:
    fields = CaptureSettings.model_fields
    return "{" + ", ".join(f"{name}: {shown(field.default)}" for name, field in fields.items()) + "}"


def between_markers(name: str) -> re.Pattern[str]:
    begin = f"<!-- {name}: made by scripts/doc-lists.py from the registry; edit them there -->\n"
    return re.compile(rf"{re.escape(begin)}(?P<list>.*?){re.escape(f'<!-- end of the {name} -->')}", re.S)


@dataclass(frozen=True)
class MadeList:
    page: str
    where: re.Pattern[str]  # its place on the page: the group `list` is what is made anew
    make: Callable[[], str]


LISTS: dict[str, MadeList] = {
    "claim terms": MadeList("docs/experiments.md", between_markers("claim terms"), claim_terms),
    "capture options": MadeList("docs/experiments.md",
                                re.compile(r"^ +capture: (?P<list>\{.*\})$", re.M), capture_options),
}


def with_list(text: str, name: str) -> str:
    """The page's text with the list `name` made anew; ValueError when the page has no place for it."""
    made = LISTS[name]
    found = made.where.search(text)
    if found is None:
        raise ValueError(f"no place for the {name}")
    return text[:found.start("list")] + made.make() + text[found.end("list"):]


def main() -> int:
    for name, made in LISTS.items():
        path = REPO / made.page
        text = path.read_text()
        try:
            new = with_list(text, name)
        except ValueError as error:
            print(f"{made.page}: {error}", file=sys.stderr)
            return 2
        if new != text:
            path.write_text(new)
            print(f"{made.page}: the {name} made anew")
    return 0


if __name__ == "__main__":
    sys.exit(main())
