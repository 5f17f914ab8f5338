"""Shell completion of scenario names and tags (Click calls these while the user presses Tab).

They read experiments.yaml with the bounded loader alone, never validating it: completion must answer
fast and never print an error into the user's shell line. A file that cannot be read completes nothing."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_EXPERIMENTS = "experiments.yaml"


def _scenarios(ctx: click.Context) -> dict:
    path = Path((ctx.params or {}).get("experiments_file") or DEFAULT_EXPERIMENTS)
    from ..base.limits import MAX_EXPERIMENTS_BYTES
    from ..base.safeload import load_yaml_file

    try:
        document = load_yaml_file(path, MAX_EXPERIMENTS_BYTES, "an experiments file")
    except Exception:  # noqa: BLE001 - completion offers nothing rather than an error
        return {}
    scenarios = document.get("scenarios") if isinstance(document, dict) else None
    return scenarios if isinstance(scenarios, dict) else {}


def complete_scenarios(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [str(name) for name in _scenarios(ctx) if str(name).startswith(incomplete)]


def complete_tags(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    tags: dict[str, None] = {}
    for body in _scenarios(ctx).values():
        for tag in (body.get("tags") or []) if isinstance(body, dict) else []:
            tags[str(tag)] = None
    return [tag for tag in tags if tag.startswith(incomplete)]
