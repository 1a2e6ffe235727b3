"""Base for every request body: unknown fields refused, unstorable text refused."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from service.text import find_unstorable


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable_text(cls, data):
        where = find_unstorable(data)
        if where is not None:
            raise ValueError(f"{where}: text contains a NUL character or an unpaired surrogate, "
                             "which cannot be stored; remove it")
        return data
