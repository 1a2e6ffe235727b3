"""Base for every request body: unknown fields refused, unstorable values refused."""
from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from service.core.text import find_unstorable


def find_nonfinite(value: Any) -> str | None:
    """The path of the first NaN or Infinity (JSON allows neither; Python's parser
    accepts both, PostgreSQL's json refuses them and no bound compares with NaN)."""
    stack = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where or "(value)"
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _storable_text(cls, data):
        where = find_unstorable(data)
        if where is not None:
            raise ValueError(f"{where}: text contains a NUL character or an unpaired surrogate, "
                             "which cannot be stored; remove it")
        where = find_nonfinite(data)
        if where is not None:
            raise ValueError(f"{where}: NaN and Infinity are not JSON numbers and cannot be stored; "
                             "send a finite number")
        return data


class FieldProblem(BaseModel):
    """A Problem as the API writes it (problem+json `errors`, and warnings in answers);
    core.errors.Problem is the same in the domain."""

    field: str
    message: str
    fix: str | None = None
