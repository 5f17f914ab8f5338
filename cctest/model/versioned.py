"""A versioned JSON document (a compact record, an archive's manifest, a guest's plan file) read into
its strict model: the same checks in the same order for each, and one line naming the file for
whatever fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..base.errors import BadInput
from .record import _shown

Model = TypeVar("Model", bound=BaseModel)


def problem(error: ValidationError, unknown_field: str) -> str:
    """pydantic's first finding as one clause: where it is and what is allowed there."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    prefix = f"{where} " if where else ""
    if first["type"] == "value_error":
        return f"{prefix}{first['ctx']['error']}"
    # a model's unknown or absent key, and a dataclass's (plan.RunSpec inside a plan file)
    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"{where}: {unknown_field}"
    if first["type"] in ("missing", "missing_argument"):
        return f"{where}: missing"
    return f"{prefix}must be {first['msg'].lower().removeprefix('input should be ')}, not {_shown(first['input'])}"


def read_bytes(path: Path, max_bytes: int, what: str, error: type[BadInput]) -> bytes:
    """A document's bytes (a regular file, at most `max_bytes`), or `error` naming `path`."""
    from ..base.safeload import Refused, read_bounded

    try:
        return read_bounded(path, max_bytes, what)
    except Refused as refused:
        raise error(f"{path}: {refused}") from None


def parse(data: bytes, source: str, model: type[Model], *, version_key: str, readable: tuple[int, ...],
          noun: str, error: type[BadInput], unknown_field: str, not_json_hint: str = "") -> Model:
    """`data` as `model`, or `error` naming `source`: JSON, an object, a version this code reads
    (`version_key`), then every field as the model types it. `noun` is what the document is ("a
    record"), `unknown_field` what a key the model lacks is called."""
    try:
        obj: Any = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as failure:
        raise error(f"{source}: not JSON ({failure.__class__.__name__}: {failure}){not_json_hint}") from None
    if not isinstance(obj, dict):
        raise error(f"{source}: not a JSON object; {noun} is one")
    version = obj.get(version_key)
    if type(version) is not int or version not in readable:
        raise error(f"{source}: {version_key} {_shown(version)}, which this cctest does not read "
                    f"(it reads {', '.join(map(str, readable))})")
    try:
        return model.model_validate(obj)
    except ValidationError as failure:
        raise error(f"{source}: unreadable ({problem(failure, unknown_field)})") from None
