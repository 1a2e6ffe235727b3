from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from service.core.schema_base import RequestBody
from service.core.text import PlainText
from service.webhooks.events import DEFAULT_EVENT_TYPES, EVENT_TYPES, EventType

Format = Literal["standard", "slack"]
EVENTS_HELP = "; ".join(f"`{k}`: {v}" for k, v in EVENT_TYPES.items())


class WebhookCreate(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "url": "https://hooks.example.com/trainjobs", "event_types": ["job.succeeded", "job.failed"],
        "format": "standard", "description": "CI pipeline"}]})

    # The pattern documents the scheme rule; the service checks it (and the address) itself, with a fix.
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)] = Field(
        json_schema_extra={"pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"},
        description="Where deliveries are POSTed: an https:// (or http://) URL on a public address")
    event_types: list[EventType] = Field(default_factory=lambda: list(DEFAULT_EVENT_TYPES), min_length=1,
                                         max_length=len(EVENT_TYPES), json_schema_extra={"uniqueItems": True},
                                         description=f"Default: the four final states. {EVENTS_HELP}")
    format: Format = Field("standard", description="standard: the JSON event, signed per Standard Webhooks; "
                                                   "slack: {\"text\": ...} for a Slack incoming webhook")
    description: Annotated[str, StringConstraints(max_length=200), PlainText] = ""

    @field_validator("event_types")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("an event type is listed twice; list each once")
        return value


class WebhookOut(BaseModel):
    id: uuid.UUID
    url: str
    event_types: list[str]
    format: str
    description: str
    paused: bool = Field(description="A paused webhook records no new events and sends nothing; its pending "
                                     "deliveries wait for `resume`")
    paused_at: datetime | None = None
    secret_prefix: str = Field(description="The first characters of the signing secret, to recognise it")
    created_at: datetime
    created_by: str


class WebhookCreated(WebhookOut):
    secret: str = Field(description="The signing secret (whsec_...). Shown only this once: store it now and "
                                    "verify every delivery's webhook-signature with it")


class AttemptOut(BaseModel):
    number: int
    at: datetime
    status_code: int | None = Field(None, description="The receiver's HTTP status; null when none came")
    error: str | None = Field(None, description="Why the attempt failed; null when it succeeded")
    response_body: str = Field(description="The start of the receiver's answer "
                                           "(TRAINJOBS_WEBHOOK_RESPONSE_LOG_BYTES)")
    duration_ms: int


class DeliveryOut(BaseModel):
    id: uuid.UUID
    message_id: str = Field(description="The webhook-id header: the same for a redelivery, so receivers can "
                                        "deduplicate")
    event_type: str
    job_id: uuid.UUID | None = None
    status: Literal["pending", "delivered", "failed"] = Field(
        description="pending: being sent or waiting for a retry; delivered: a 2xx came back; failed: every "
                    "attempt failed (redeliver it once the receiver works)")
    attempts: int
    next_attempt_at: datetime | None = None
    last_attempt_at: datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    redelivery_of: uuid.UUID | None = Field(None, description="The delivery this one repeats")
    created_at: datetime


class DeliveryDetail(DeliveryOut):
    payload: dict = Field(description="The event as sent in the standard format")
    attempt_log: list[AttemptOut]


class DeliveryPage(BaseModel):
    items: list[DeliveryOut]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next (older) page")
