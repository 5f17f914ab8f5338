"""Shell completion of scenario names and tags (Click calls these while the user presses Tab).

They read experiments.yaml and its suite files with the bounded loader alone, never validating them:
completion must answer fast and never print an error into the user's shell line. A file that cannot
be read completes nothing."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_EXPERIMENTS = "experiments.yaml"


def _scenarios(ctx: click.Context) -> dict:
    """The scenarios of the experiments file and of the suite files it includes, by name."""
    path = Path((ctx.params or {}).get("experiments_file") or DEFAULT_EXPERIMENTS)
    document = _document(path)
    scenarios = dict(_mapping(document.get("scenarios")))
    folder = path.parent.resolve()
    includes = document.get("include")
    for entry in includes if isinstance(includes, list) else []:
        for named in _suite_entries(str(entry), folder):
            suite = folder / named
            if suite.resolve().is_relative_to(folder):  # as the loader reads includes: inside the folder
                scenarios.update(_mapping(_document(suite).get("scenarios")))
    return scenarios


def _suite_entries(entry: str, folder: Path) -> list[str]:
    """An include entry, or the suite files of the folder it names."""
    from ..model.suites import folder_entries

    if not (folder / entry).is_dir():
        return [entry]
    try:
        return folder_entries(entry, folder / entry)
    except (OSError, ValueError):
        return []


def _document(path: Path) -> dict:
    from ..base.limits import MAX_EXPERIMENTS_BYTES
    from ..base.safeload import load_yaml_file

    try:
        document = load_yaml_file(path, MAX_EXPERIMENTS_BYTES, "an experiments file")
    except Exception:  # noqa: BLE001 - completion offers nothing rather than an error
        return {}
    return document if isinstance(document, dict) else {}


def _mapping(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def complete_scenarios(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [str(name) for name in _scenarios(ctx) if str(name).startswith(incomplete)]


def complete_tags(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    tags: dict[str, None] = {}
    for body in _scenarios(ctx).values():
        for tag in (body.get("tags") or []) if isinstance(body, dict) else []:
            tags[str(tag)] = None
    return [tag for tag in tags if tag.startswith(incomplete)]
