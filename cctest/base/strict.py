"""The strict pydantic base of every user-facing model: unknown keys, NaN/inf and booleans given
for numbers are refused, so a typo in experiments.yaml is an error, never a silent default."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


def takes_bool(annotation: object) -> bool:
    return annotation is bool or bool in typing.get_args(annotation)


def no_booleans_for_numbers(model: type[BaseModel], data: Any) -> Any:
    """pydantic reads true as 1 for a number (`rate_mbps: true` ran at 1 Mbit/s, `loss_pct: yes` at
    1 %): a yes/no value is refused wherever the key does not take one."""
    if isinstance(data, dict):
        for name, info in model.model_fields.items():
            if isinstance(data.get(name), bool) and not takes_bool(info.annotation):
                raise ValueError(f"{name}: {str(data[name]).lower()} is a yes/no value, not a number")
    return data


class Strict(BaseModel):
    # allow_inf_nan: YAML's .inf and .nan are numbers to PyYAML, never a rate, delay or buffer.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def no_booleans(cls, data: Any) -> Any:
        return no_booleans_for_numbers(cls, data)
