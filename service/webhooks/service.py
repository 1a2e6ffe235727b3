"""Subscriptions, the delivery log and redelivery. Every lookup is within the caller's
team: another team's webhook is a 404, as if it did not exist."""
from __future__ import annotations

import uuid

from sqlalchemy import func, insert, select, tuple_, update
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Invalid, NotFound, Problem
from service.core.pagination import decode_time_cursor, encode_cursor
from service.core.text import plural
from service.lifecycle.wake import Wake, Waker, notify_controller
from service.persistence.models import (
    Team,
    WebhookAttempt,
    WebhookDelivery,
    WebhookSubscription,
    utcnow,
)
from service.webhooks import destinations, events
from service.webhooks.limits import WebhookLimits
from service.webhooks.outbox import DISPATCHER, pending_row
from service.webhooks.schemas import WebhookCreate
from service.webhooks.signing import new_message_id, new_secret

SECRET_PREFIX_SHOWN = 10


def create(session: Session, team_id: uuid.UUID, body: WebhookCreate, actor: str,
           limits: WebhookLimits) -> tuple[WebhookSubscription, str]:
    try:
        destinations.check_at_creation(body.url, limits.allowed_networks, limits.resolve_timeout)
    except destinations.Refused as e:
        raise Invalid.of([Problem("url", e.message, e.fix)]) from None
    # The team row, locked (PostgreSQL): two creates at once cannot both pass the count.
    session.execute(select(Team.id).where(Team.id == team_id).with_for_update()).one()
    count = session.execute(select(func.count()).select_from(WebhookSubscription)
                            .where(WebhookSubscription.team_id == team_id)).scalar_one()
    if count >= limits.max_per_team:
        raise Conflict(f"your team has {plural(count, 'webhook')}, the most TRAINJOBS_WEBHOOK_MAX_PER_TEAM allows "
                       f"({limits.max_per_team}); delete one it no longer needs (DELETE /v1/webhooks/{{id}})")
    secret = new_secret()
    sub = WebhookSubscription(team_id=team_id, url=body.url, event_types=list(body.event_types),
                              format=body.format, description=body.description, secret=secret, created_by=actor)
    session.add(sub)
    session.flush()
    return sub, secret


def secret_prefix(sub: WebhookSubscription) -> str:
    return sub.secret[:SECRET_PREFIX_SHOWN]


def list_subscriptions(session: Session, team_id: uuid.UUID) -> list[WebhookSubscription]:
    return list(session.scalars(select(WebhookSubscription).where(WebhookSubscription.team_id == team_id)
                                .order_by(WebhookSubscription.created_at, WebhookSubscription.id)))


def get(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID) -> WebhookSubscription:
    sub = session.get(WebhookSubscription, webhook_id)
    if sub is None or sub.team_id != team_id:
        raise NotFound(f"no webhook with id {webhook_id}")
    return sub


def remove(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID) -> None:
    """The webhook, its pending deliveries (never sent now) and its log go."""
    sub = get(session, team_id, webhook_id)
    session.delete(sub)
    session.flush()


def set_paused(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID, paused: bool) -> WebhookSubscription:
    sub = get(session, team_id, webhook_id)
    if paused and sub.paused_at is None:
        sub.paused_at = utcnow()
    elif not paused and sub.paused_at is not None:
        sub.paused_at = None
        # What waited during the pause is due now, not at its old retry time.
        session.execute(update(WebhookDelivery)
                        .where(WebhookDelivery.subscription_id == sub.id, WebhookDelivery.status == "pending")
                        .values(next_attempt_at=utcnow()))
        notify_controller(session, DISPATCHER)
    session.flush()
    return sub


def resume(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID, waker: Waker) -> WebhookSubscription:
    """Resume a paused webhook: committed here, then the dispatcher is woken, so what waited
    is sent at once."""
    sub = set_paused(session, team_id, webhook_id, False)
    _commit_and_wake(session, waker)
    return sub


def _commit_and_wake(session: Session, waker: Waker | None) -> None:
    """Commit (the NOTIFY for a controller elsewhere goes with it), then wake this process's
    dispatcher if it controls: a delivery queued by a request goes out at once. The unit of
    work's own commit afterwards finds nothing left to do."""
    if waker is None:
        return
    session.commit()
    waker.after(Wake(DISPATCHER))


def _active(sub: WebhookSubscription) -> None:
    if sub.paused_at is not None:
        raise Conflict(f"webhook {sub.id} is paused: nothing is sent to it; resume it first "
                       f"(POST /v1/webhooks/{sub.id}/resume)")


def send_test(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID, actor: str,
              waker: Waker | None = None) -> WebhookDelivery:
    """Queue a `webhook.test` delivery; with `waker`, committed and sent at once."""
    sub = get(session, team_id, webhook_id)
    _active(sub)
    payload = {"type": events.TEST_EVENT, "timestamp": utcnow().isoformat(),
               "data": {"webhook_id": str(sub.id), "sent_by": actor,
                        "message": "a test delivery, sent on request: if you can read this, the webhook works"}}
    delivery = _queue(session, pending_row(sub.id, new_message_id(), events.TEST_EVENT, None, payload))
    _commit_and_wake(session, waker)
    return delivery


def _queue(session: Session, row: dict) -> WebhookDelivery:
    session.execute(insert(WebhookDelivery), [row])
    notify_controller(session, DISPATCHER)
    return session.get_one(WebhookDelivery, row["id"])   # inserted just above


def list_deliveries(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID, *, status: str | None,
                    limit: int, cursor: str | None) -> tuple[list[WebhookDelivery], str | None]:
    """Newest first, keyset-paged on (created_at, id)."""
    get(session, team_id, webhook_id)
    q = select(WebhookDelivery).where(WebhookDelivery.subscription_id == webhook_id)
    if status:
        q = q.where(WebhookDelivery.status == status)
    if cursor:
        q = q.where(tuple_(WebhookDelivery.created_at, WebhookDelivery.id) < decode_time_cursor(cursor))
    rows = list(session.scalars(q.order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
                                .limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1].created_at.isoformat(), rows[-1].id) if more else None


def get_delivery(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID,
                 delivery_id: uuid.UUID) -> tuple[WebhookDelivery, list[WebhookAttempt]]:
    get(session, team_id, webhook_id)
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None or delivery.subscription_id != webhook_id:
        raise NotFound(f"no delivery with id {delivery_id} for webhook {webhook_id}")
    attempts = list(session.scalars(select(WebhookAttempt).where(WebhookAttempt.delivery_id == delivery_id)
                                    .order_by(WebhookAttempt.number, WebhookAttempt.id)))
    return delivery, attempts


def redeliver(session: Session, team_id: uuid.UUID, webhook_id: uuid.UUID,
              delivery_id: uuid.UUID, waker: Waker | None = None) -> WebhookDelivery:
    """A new delivery of the same message (same webhook-id and payload), retried afresh; with
    `waker`, committed and sent at once."""
    original, _ = get_delivery(session, team_id, webhook_id, delivery_id)
    _active(get(session, team_id, webhook_id))
    if original.status == "pending":
        raise Conflict(f"delivery {delivery_id} is still being delivered (attempt {original.attempts + 1} is due "
                       f"at {original.next_attempt_at:%Y-%m-%dT%H:%M:%SZ}); redeliver it once it has "
                       "succeeded or failed", delivery_status=original.status)
    delivery = _queue(session, pending_row(webhook_id, original.message_id, original.event_type, original.job_id,
                                           original.payload, redelivery_of=original.id))
    _commit_and_wake(session, waker)
    return delivery
