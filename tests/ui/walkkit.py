"""Rows for the tests of issue 49's walk (preempted attempts, priority classes, the queue's small
print): jobs shaped as the controller and the engine leave them, written with SQLAlchemy through
the service's own models, on a service with no controller (its jobs stay as written)."""
from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import update

from service.core.clock import utcnow
from service.persistence.models import Job, PriorityClass
from tests.capacity.queuekit import write


def preempt(db_url: str, first: str, second: str, *, reason: str = "reclaim: team beta takes back its nominal quota",
            second_state: str = "SUCCEEDED") -> None:
    """`first` preempted (FAILED, error.cause "preemption"), `second` its attempt 2 (retry_of first)
    that went on and ended `second_state`, as the engine and retries.plan_preemption leave them
    (updated_at too: the pages' live feed reads the jobs whose updated_at moved)."""
    now = utcnow()

    def shape(session):
        session.execute(update(Job).where(Job.id == uuid.UUID(first)).values(
            state="FAILED", updated_at=now, backend_ref=f"test-{first}", started_at=now - timedelta(minutes=9),
            ended_at=now - timedelta(minutes=5), preempt_requested_at=now - timedelta(minutes=5),
            preempt_reason=reason, progress={"epoch": 1, "epochs": 3, "preempted_at": {"step": 42}},
            error={"cause": "preemption", "kind": "reclaim", "message": f"preempted ({reason})"}))
        session.execute(update(Job).where(Job.id == uuid.UUID(second)).values(
            attempt=2, retry_of=uuid.UUID(first), preemptions=1, state=second_state, updated_at=now,
            backend_ref=f"test-{second}",
            started_at=now - timedelta(minutes=4), ended_at=now if second_state != "RUNNING" else None))
    write(db_url, shape)


def fail(db_url: str, job_id: str, message: str = "replica chief-0 exited with code 3") -> None:
    write(db_url, lambda s: s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(
        state="FAILED", updated_at=utcnow(), backend_ref=f"test-{job_id}", started_at=utcnow(), ended_at=utcnow(),
        error={"message": message, "exit_code": 3, "replica": "workerpool0-0"})))


def add_class(db_url: str, name: str, value: int, description: str, teams: list[str] | None = None,
              preempts: bool = False) -> None:
    write(db_url, lambda s: s.add(PriorityClass(name=name, value=value, description=description, teams=teams,
                                                preempts=preempts, updated_by="operator")))
