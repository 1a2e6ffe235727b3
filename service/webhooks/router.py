"""/v1/webhooks: a team's webhook subscriptions and their delivery logs (admins only:
a URL may carry a receiver's own secret, e.g. a Slack webhook's)."""
from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from service.auth.deps import Admin
from service.core.pagination import decode_time_cursor
from service.persistence.models import (
    WebhookAttempt,
    WebhookDelivery,
    WebhookSubscription,
)
from service.web.container import SessionDep, services
from service.web.lookup import Cursor
from service.web.problems import problem_responses
from service.webhooks import service
from service.webhooks.limits import WebhookLimits
from service.webhooks.schemas import (
    AttemptOut,
    DeliveryDetail,
    DeliveryOut,
    DeliveryPage,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


def _limits(request: Request) -> WebhookLimits:
    return services(request).webhook_limits


def _out(sub: WebhookSubscription) -> dict:
    return dict(id=sub.id, url=sub.url, event_types=sub.event_types, format=sub.format,
                description=sub.description, paused=sub.paused_at is not None, paused_at=sub.paused_at,
                secret_prefix=service.secret_prefix(sub), created_at=sub.created_at, created_by=sub.created_by)


def _delivery(d: WebhookDelivery) -> dict:
    return dict(id=d.id, message_id=d.message_id, event_type=d.event_type, job_id=d.job_id, status=d.status,
                attempts=d.attempts, next_attempt_at=d.next_attempt_at, last_attempt_at=d.last_attempt_at,
                last_status_code=d.last_status_code, last_error=d.last_error, delivered_at=d.delivered_at,
                redelivery_of=d.redelivery_of, created_at=d.created_at)


def _detail(d: WebhookDelivery, attempts: list[WebhookAttempt]) -> DeliveryDetail:
    return DeliveryDetail(**_delivery(d), payload=d.payload, attempt_log=[
        AttemptOut(number=a.number, at=a.at, status_code=a.status_code, error=a.error,
                   response_body=a.response_body, duration_ms=a.duration_ms) for a in attempts])


@router.post("", status_code=201, response_model=WebhookCreated, operation_id="webhooks_create",
             summary="Subscribe a URL to your team's job events (admin); the signing secret is shown once",
             responses=problem_responses(401, 403, 409, 413, 422, 503))
def create_webhook(body: WebhookCreate, request: Request, session: SessionDep, actor: Admin, response: Response):
    sub, secret = service.create(session, actor.team_id, body, actor.name, _limits(request))
    response.headers["Cache-Control"] = "no-store"
    response.headers["Location"] = f"/v1/webhooks/{sub.id}"
    return WebhookCreated(**_out(sub), secret=secret)


@router.get("", response_model=list[WebhookOut], operation_id="webhooks_list",
            summary="Your team's webhooks (admin); secrets are never shown again",
            responses=problem_responses(401, 403, 503))
def list_webhooks(session: SessionDep, actor: Admin):
    return [_out(s) for s in service.list_subscriptions(session, actor.team_id)]


@router.get("/{webhook_id}", response_model=WebhookOut, operation_id="webhooks_get", summary="A webhook (admin)",
            responses=problem_responses(401, 403, 404, 422, 503))
def get_webhook(webhook_id: uuid.UUID, session: SessionDep, actor: Admin):
    return _out(service.get(session, actor.team_id, webhook_id))


@router.delete("/{webhook_id}", status_code=204, response_class=Response, operation_id="webhooks_delete",
               summary="Delete a webhook (admin): its pending deliveries are never sent, its log goes",
               responses=problem_responses(401, 403, 404, 422, 503))
def delete_webhook(webhook_id: uuid.UUID, session: SessionDep, actor: Admin):
    service.remove(session, actor.team_id, webhook_id)
    return Response(status_code=204)


@router.post("/{webhook_id}/pause", response_model=WebhookOut, operation_id="webhooks_pause",
             summary="Pause a webhook (admin): no new events are recorded for it and nothing is sent",
             responses=problem_responses(401, 403, 404, 422, 503))
def pause_webhook(webhook_id: uuid.UUID, session: SessionDep, actor: Admin):
    return _out(service.set_paused(session, actor.team_id, webhook_id, True))


@router.post("/{webhook_id}/resume", response_model=WebhookOut, operation_id="webhooks_resume",
             summary="Resume a paused webhook (admin): its pending deliveries are sent at once",
             responses=problem_responses(401, 403, 404, 422, 503))
def resume_webhook(webhook_id: uuid.UUID, request: Request, session: SessionDep, actor: Admin):
    return _out(service.resume(session, actor.team_id, webhook_id, services(request).waker))


@router.post("/{webhook_id}/test", status_code=202, response_model=DeliveryOut, operation_id="webhooks_test",
             summary="Send a `webhook.test` event now (admin), to check the receiver; see its delivery",
             responses=problem_responses(401, 403, 404, 409, 422, 503))
def test_webhook(webhook_id: uuid.UUID, request: Request, session: SessionDep, actor: Admin):
    return _delivery(service.send_test(session, actor.team_id, webhook_id, actor.name, services(request).waker))


@router.get("/{webhook_id}/deliveries", response_model=DeliveryPage, operation_id="webhooks_deliveries",
            summary="A webhook's delivery log, newest first (admin)",
            responses=problem_responses(401, 403, 404, 422, 503))
def list_deliveries(webhook_id: uuid.UUID, session: SessionDep, actor: Admin,
                    status: Annotated[Literal["pending", "delivered", "failed"] | None, Query()] = None,
                    limit: Annotated[int, Query(ge=1, le=200)] = 50,
                    cursor: Cursor = None):
    if cursor:
        decode_time_cursor(cursor)  # a forged cursor is a 422 before any query sees it
    rows, next_cursor = service.list_deliveries(session, actor.team_id, webhook_id, status=status, limit=limit,
                                                cursor=cursor)
    return DeliveryPage(items=[DeliveryOut(**_delivery(d)) for d in rows], next_cursor=next_cursor)


@router.get("/{webhook_id}/deliveries/{delivery_id}", response_model=DeliveryDetail,
            operation_id="webhooks_delivery", summary="One delivery: its payload and every attempt (admin)",
            responses=problem_responses(401, 403, 404, 422, 503))
def get_delivery(webhook_id: uuid.UUID, delivery_id: uuid.UUID, session: SessionDep, actor: Admin):
    return _detail(*service.get_delivery(session, actor.team_id, webhook_id, delivery_id))


@router.post("/{webhook_id}/deliveries/{delivery_id}/redeliver", status_code=202, response_model=DeliveryOut,
             operation_id="webhooks_redeliver",
             summary="Send a delivery again (admin): a new delivery with the same webhook-id and payload",
             responses=problem_responses(401, 403, 404, 409, 422, 503))
def redeliver(webhook_id: uuid.UUID, delivery_id: uuid.UUID, request: Request, session: SessionDep,
              actor: Admin):
    return _delivery(service.redeliver(session, actor.team_id, webhook_id, delivery_id, services(request).waker))
