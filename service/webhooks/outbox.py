"""The outbox: a lifecycle listener (Engine.listen) that writes one delivery row per
event per subscription inside the transaction of the job change itself. The row commits
with the change or rolls back with it, so no event is lost when a process dies after
the change, and none is sent for a change that never happened. Only the controller's
dispatcher sends them (dispatcher.py); request threads never do."""
from __future__ import annotations

import uuid

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from service.lifecycle.engine import Change, batch_scratch
from service.lifecycle.wake import notify_controller
from service.persistence.models import (
    Job,
    Team,
    WebhookDelivery,
    WebhookSubscription,
    utcnow,
)
from service.webhooks import events
from service.webhooks.limits import WebhookLimits
from service.webhooks.signing import new_message_id

WEBHOOK_TEAMS = "webhooks.teams"   # a batch's scratch key (Engine.batch): the teams with an unpaused webhook
DISPATCHER = "webhooks"   # the dispatcher's name: what wakes it (Controller.wake, NOTIFY payload)
_JOB_COLUMNS = (Job.id, Job.display_name, Job.template_name, Job.template_version, Job.backend, Job.labels,
                Job.created_by, Job.created_at, Job.started_at, Job.ended_at, Job.console_url, Job.error,
                Job.progress, Job.placement)


def pending_row(subscription_id: uuid.UUID, message_id: str, event_type: str, job_id: uuid.UUID | None,
                payload: dict, **extra) -> dict:
    now = utcnow()
    return {"id": uuid.uuid4(), "subscription_id": subscription_id, "message_id": message_id,
            "event_type": event_type, "job_id": job_id, "payload": payload, "status": "pending", "attempts": 0,
            "next_attempt_at": now, "created_at": now, **extra}


class Outbox:
    def __init__(self, limits: WebhookLimits) -> None:
        self.limits = limits

    def on_change(self, session: Session, change: Change) -> None:
        to_state = change.to_state
        if to_state is None:
            return   # progress only: no event
        types = events.types_for(change.from_state, to_state, preempted=bool((change.context or {}).get("preempted")))
        if not types or (change.context or {}).get("team_webhooks") is False:
            return
        if not self._team_may_have_webhooks(session, (change.context or {}).get("team_id")):
            return
        # One query on every state change; more only when the job's team has a webhook that wants it.
        subscriptions = session.execute(
            select(WebhookSubscription.id, WebhookSubscription.event_types)
            .join(Job, Job.team_id == WebhookSubscription.team_id)
            .where(Job.id == change.job_id, WebhookSubscription.paused_at.is_(None))).all()
        wanted = [(sid, t) for sid, subscribed in subscriptions for t in types if t in (subscribed or [])]
        if not wanted:
            return
        job = session.execute(select(*_JOB_COLUMNS, Team.name.label("team"))
                              .join(Team, Team.id == Job.team_id).where(Job.id == change.job_id)).one()
        # One message per event type: every subscription gets the same webhook-id for it.
        messages: dict[str, tuple[str, dict]] = {}
        rows = []
        for subscription_id, event_type in wanted:
            if event_type not in messages:
                messages[event_type] = (new_message_id(), events.job_payload(
                    event_type, job, job.team, from_state=change.from_state, to_state=to_state,
                    reason=change.reason, actor=change.actor, at=change.at, public_url=self.limits.public_url,
                    max_bytes=self.limits.max_payload_bytes))
            message_id, payload = messages[event_type]
            rows.append(pending_row(subscription_id, message_id, event_type, change.job_id, payload))
        session.execute(insert(WebhookDelivery), rows)
        notify_controller(session, DISPATCHER)

    @staticmethod
    def _team_may_have_webhooks(session: Session, team_id: uuid.UUID | None) -> bool:
        """In a batch of changes (a controller pass: Engine.batch), the teams with an unpaused
        webhook are read once for the batch, not per change (a sim job's four changes each paid a
        query for none; a team's first webhook, created while a batch is written, gets the changes
        of the batches after it); outside one, or for a job whose team is not known, True: ask per
        change."""
        scratch = batch_scratch(session)
        if scratch is None or team_id is None:
            return True
        if WEBHOOK_TEAMS not in scratch:
            scratch[WEBHOOK_TEAMS] = frozenset(session.execute(
                select(WebhookSubscription.team_id).where(WebhookSubscription.paused_at.is_(None)).distinct()).scalars())
        return team_id in scratch[WEBHOOK_TEAMS]
