#!/usr/bin/env python3
"""The lists the docs carry that are made from the registries they describe, each between its
markers: the claim language's terms in docs/experiments.md, from cctest/model/metric_table.py.
Rewrites each list in place; tests/repo/test_doc_lists.py fails while one is stale.

Usage: .venv/bin/python scripts/doc-lists.py
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from cctest.model.metric_table import CC_METRICS, RUN_METRICS

REPO = Path(__file__).resolve().parent.parent


def claim_terms() -> str:
    """A row per term a claim can name: a run's metrics as they are, a congestion control's as term(cc)."""
    rows = [(m.term, m) for m in RUN_METRICS if m.term] + [(f"{m.term}(cc)", m) for m in CC_METRICS if m.term]
    return "\n".join(["| term | what it measures | steady state |", "|---|---|---|",
                      *(f"| `{term}` | {m.meaning} | {'yes' if m.steady else ''} |" for term, m in rows)])


# name -> the page it is on and what makes it
LISTS: dict[str, tuple[str, Callable[[], str]]] = {
    "claim terms": ("docs/experiments.md", claim_terms),
}


def markers(name: str) -> tuple[str, str]:
    return (f"<!-- {name}: made by scripts/doc-lists.py from the registry; edit them there -->",
            f"<!-- end of the {name} -->")


def with_list(text: str, name: str, body: str) -> str:
    """The page's text with the list `name` made anew; ValueError when the page lacks its markers."""
    begin, end = markers(name)
    pattern = re.compile(rf"{re.escape(begin)}\n.*?{re.escape(end)}", re.S)
    if not pattern.search(text):
        raise ValueError(f"no {name} between the markers {begin} ... {end}")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text, count=1)


def main() -> int:
    for name, (page, make) in LISTS.items():
        path = REPO / page
        text = path.read_text()
        try:
            made = with_list(text, name, make())
        except ValueError as error:
            print(f"{page}: {error}", file=sys.stderr)
            return 2
        if made != text:
            path.write_text(made)
            print(f"{page}: {name} made anew")
    return 0


if __name__ == "__main__":
    sys.exit(main())
