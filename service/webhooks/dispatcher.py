"""The controller's webhook loop service: send the deliveries that are due, record each
attempt, schedule retries with exponential backoff (TRAINJOBS_WEBHOOK_RETRY_*), give up
after the retry window or the most attempts, and drop finished deliveries past their
retention. Only the controller runs it (service.lifecycle.services), and its writes
carry the controller's fencing epoch: a deposed controller records nothing.

Delivery is at least once: a controller that dies after sending but before recording
leaves the row pending, and the next controller sends it again with the same
`webhook-id`, by which receivers deduplicate (as Standard Webhooks asks)."""
from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, exists, insert, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from service.lifecycle.engine import LEASE, Deposed, Engine
from service.lifecycle.services import LoopService
from service.persistence.models import (
    ControllerLease,
    WebhookAttempt,
    WebhookDelivery,
    WebhookSubscription,
    utcnow,
)
from service.persistence.rows import rows_changed, table_of
from service.webhooks import events, lookups, sender, signing
from service.webhooks.limits import WebhookLimits
from service.webhooks.outbox import DISPATCHER

log = logging.getLogger("trainjobs.webhooks")
RECORD_ATTEMPTS = 3
CLEAN_EVERY_SECONDS = 300.0
CLEAN_BATCH = 1000


@dataclass(frozen=True)
class Due:
    id: uuid.UUID
    message_id: str
    attempts: int
    created_at: datetime
    payload: dict
    url: str
    secret: str
    format: str
    team_id: uuid.UUID   # the subscription's team: whose share of the lookup threads (webhooks/lookups.py)


def backoff(attempt: int, limits: WebhookLimits, rng: random.Random = random.Random()) -> float:
    """Seconds to wait after failed attempt number `attempt` (1 = the first)."""
    wait = min(limits.retry_initial * 2 ** min(attempt - 1, 60), limits.retry_max_interval)
    if limits.retry_jitter:
        wait *= 1 + rng.uniform(-limits.retry_jitter, limits.retry_jitter)
    return wait


def body_of(due: Due, max_bytes: int) -> bytes:
    if due.format == "slack":
        return events.body_bytes(events.slack_payload(due.payload, max_bytes))
    body = events.body_bytes(due.payload)
    # Bounded when written; a smaller setting since then still holds.
    return body if len(body) <= max_bytes else events.body_bytes(events.bounded(due.payload, max_bytes))


class Dispatcher(LoopService):
    name = DISPATCHER

    def __init__(self, session_factory: sessionmaker[Session], engine: Engine, limits: WebhookLimits, *,
                 fence: int | None) -> None:
        super().__init__(interval=limits.interval)
        self.session_factory = session_factory
        self.engine = engine
        self.limits = limits
        self.fence = fence
        self.sent = 0        # attempts made by this dispatcher (tests, metrics)
        self.failed = 0
        self._last_clean = 0.0
        self.lookups = lookups.for_process(limits.concurrency)

    # -- one pass --------------------------------------------------------------------------
    def run_once(self) -> bool:
        due = self._due()
        if due:
            outcomes = self._send(due)
            self._record(due, outcomes)
        if time.monotonic() - self._last_clean > CLEAN_EVERY_SECONDS:
            self._clean()
        return len(due) >= self.limits.batch_size and not self.stopping

    def _check_fence(self, session: Session) -> None:
        if self.fence is not None and not self.engine.fence_holds(session, self.fence):
            raise Deposed(f"controller epoch {self.fence} is no longer current")

    def _due(self) -> list[Due]:
        with self.session_factory() as session:
            self._check_fence(session)
            rows = session.execute(
                select(WebhookDelivery.id, WebhookDelivery.message_id, WebhookDelivery.attempts,
                       WebhookDelivery.created_at, WebhookDelivery.payload, WebhookSubscription.url,
                       WebhookSubscription.secret, WebhookSubscription.format, WebhookSubscription.team_id)
                .join(WebhookSubscription, WebhookSubscription.id == WebhookDelivery.subscription_id)
                .where(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= utcnow(),
                       WebhookSubscription.paused_at.is_(None))
                .order_by(WebhookDelivery.next_attempt_at).limit(self.limits.batch_size)).all()
            session.rollback()  # no transaction held while the receivers answer
        return [Due(*r) for r in rows]

    def _send(self, due: list[Due]) -> list[sender.Outcome]:
        # A loop of our own per pass. Names are looked up on the process's lookup threads
        # (service/webhooks/lookups.py): closing the loop never waits for a lookup that hangs
        # (the attempt's deadline has already given up on it), and none is made per pass.
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self._send_all(due))
        finally:
            loop.close()

    async def _send_all(self, due: list[Due]) -> list[sender.Outcome]:
        gate = asyncio.Semaphore(self.limits.concurrency)
        async with sender.client(self.limits.concurrency) as http:
            async def one(d: Due) -> sender.Outcome:
                async with gate:
                    try:
                        body = body_of(d, self.limits.max_payload_bytes)
                        headers = signing.headers(d.secret, d.message_id, int(time.time()), body)
                        return await sender.attempt(http, d.url, body, headers, lookups=self.lookups, team=d.team_id,
                                                    allowed=self.limits.allowed_networks,
                                                    timeout=self.limits.request_timeout,
                                                    response_bytes=self.limits.response_log_bytes)
                    except Exception as e:  # one bad delivery must not hold back the batch
                        log.exception("webhook delivery %s: could not be attempted", d.id)
                        return sender.Outcome(False, None, f"could not be sent: {type(e).__name__}", "", 0)
            return list(await asyncio.gather(*(one(d) for d in due)))

    def _record(self, due: list[Due], outcomes: list[sender.Outcome]) -> None:
        for attempt in range(RECORD_ATTEMPTS):
            try:
                with self.session_factory() as session:
                    self._record_in(session, due, outcomes)
                    session.commit()
                break
            except OperationalError:
                if attempt + 1 == RECORD_ATTEMPTS:
                    raise
                time.sleep(0.05 * (attempt + 1))  # SQLite: another writer held the lock
        for o in outcomes:
            self.sent += 1
            self.failed += 0 if o.ok else 1

    def _record_in(self, session: Session, due: list[Due], outcomes: list[sender.Outcome]) -> None:
        now = utcnow()
        attempts = []
        for d, o in zip(due, outcomes, strict=False):
            number = d.attempts + 1
            values: dict = {"attempts": number, "last_attempt_at": now, "last_status_code": o.status_code,
                            "last_error": o.error}
            if o.ok:
                values.update(status="delivered", delivered_at=now, next_attempt_at=None)
            else:
                next_at = now + timedelta(seconds=backoff(number, self.limits))
                if number >= self.limits.max_attempts or \
                        next_at > d.created_at + timedelta(seconds=self.limits.retry_window):
                    values.update(status="failed", next_attempt_at=None)
                else:
                    values.update(next_attempt_at=next_at)
            # Core statements on the table: one per delivery, without the ORM's per-statement cost.
            t = table_of(WebhookDelivery)
            stmt = update(t).where(t.c.id == d.id, t.c.status == "pending", t.c.attempts == d.attempts)
            if self.fence is not None:
                stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == self.fence))
            if rows_changed(session.execute(stmt.values(**values))) != 1:
                self._check_fence(session)
                continue  # deleted (with its subscription) while it was being sent
            attempts.append({"delivery_id": d.id, "number": number, "at": now, "status_code": o.status_code,
                             "error": o.error, "response_body": o.response_body, "duration_ms": o.duration_ms})
            if not o.ok:
                log.info("webhook delivery %s (%s) attempt %d failed: %s", d.id, d.message_id, number, o.error)
        if attempts:
            session.execute(insert(table_of(WebhookAttempt)), attempts)

    def _clean(self) -> None:
        self._last_clean = time.monotonic()
        cutoff = utcnow() - timedelta(days=self.limits.retention_days)
        with self.session_factory() as session:
            old = select(WebhookDelivery.id).where(WebhookDelivery.created_at < cutoff,
                                                   WebhookDelivery.status != "pending").limit(CLEAN_BATCH)
            ids = list(session.scalars(old))
            if ids:
                session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(ids)))
                session.execute(delete(WebhookDelivery).where(WebhookDelivery.id.in_(ids)))
                session.commit()
                log.info("deleted %d webhook deliveries older than %g days", len(ids), self.limits.retention_days)
