from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.core.schema_base import RequestBody


class TokenCreate(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "ci-pipeline", "role": "member"}]})

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")] = Field(
        description="Who or what uses it, e.g. alice or ci-pipeline")
    role: Literal["viewer", "member", "admin"] = Field(
        description="viewer reads; member also submits and cancels jobs; admin also manages templates and tokens")


class TokenOut(BaseModel):
    id: uuid.UUID
    name: str
    role: str
    team: str
    prefix: str = Field(description="The first characters of the token, to recognise it")
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None


class TokenCreated(TokenOut):
    token: str = Field(description="The secret. Shown only this once: store it now.")
