#!/usr/bin/env python3
"""The `--tag` options that select every paper suite of an experiments file, read from its suite
files' headers: `paper` (the scenarios at the papers' scale) or `quick` (their scaled-down copies).
The nightly workflow and the Slurm jobs run these, so a new suite file runs without editing them.

Usage: .venv/bin/python scripts/suite-tags.py paper|quick [EXPERIMENTS_FILE]
"""

from __future__ import annotations

import sys

from cctest.base.errors import BadInput
from cctest.model.scenario import load_experiments


def suite_options(kind: str, path: str) -> str:
    experiments = load_experiments(path)
    carried = {tag for scenario in experiments.scenarios.values() for tag in scenario.tags}
    tags = [suite.tag if kind == "paper" else suite.quick_tag for suite in experiments.suites.values()]
    return " ".join(f"--tag {tag}" for tag in tags if tag in carried)  # a suite may have no quick copies


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[1] not in ("paper", "quick"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        print(suite_options(argv[1], argv[2] if len(argv) == 3 else "experiments.yaml"))
    except BadInput as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
