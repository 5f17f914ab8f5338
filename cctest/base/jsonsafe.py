"""JSON that strict readers accept: NaN and infinities become null (JSON has no such numbers),
numpy scalars become Python numbers. Every JSON file cctest writes from measured numbers goes
through here (checks.json, summary.json, claims.json, the report's figures)."""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(o: Any) -> Any:
    """A copy of `o` that json.dumps(..., allow_nan=False) can write: NaN/inf -> None, numpy
    scalars -> Python numbers, dict keys -> str; anything else with an .item() that fails (an
    array of several values) -> its text."""
    if isinstance(o, dict):
        return {str(k): json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        try:
            o = o.item()
        except (ValueError, AttributeError):
            return str(o)
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def dumps(o: Any, **kwargs: Any) -> str:
    """json.dumps of json_safe(o); a value it cannot make safe raises instead of writing NaN."""
    return json.dumps(json_safe(o), allow_nan=False, **kwargs)
