"""A job's preemptions, read from its attempts' rows (the job view's `preemptions`, the UI's
job page): when the controller asked, for which waiting job, why, the step kept at SIGTERM
and the step the next attempt went on from (docs/queue.md, "What a preemption costs")."""
from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.jobs.schemas import PreemptionRef
from service.lifecycle import preempted
from service.persistence.models import Job


def preemptions_of(session: Session, team_id: uuid.UUID, attempts: list) -> list[PreemptionRef]:
    """The preemptions over a job's attempts (service.attempts_of's rows, in order), as team
    `team_id` may read them: the waiting job each was for is named only when it is the team's
    own (another team's job ids are not theirs to learn; `why` says which team it was)."""
    out = []
    for i, a in enumerate(attempts):
        after = attempts[i + 1] if i + 1 < len(attempts) else None
        error = a.error if isinstance(a.error, dict) else {}
        if a.preempt_requested_at is None and error.get("cause") != "preemption":
            continue
        kind, why = preempted.kind_and_why(a)
        kept = ((a.progress or {}).get("preempted_at") or {}).get("step") if isinstance(a.progress, dict) else None
        resumed = (after.progress or {}).get("resumed_at_step") if after is not None and \
            isinstance(after.progress, dict) else None
        out.append(PreemptionRef(attempt=a.id, at=a.preempt_requested_at, for_job=a.preempted_for,
                                 kind=kind or error.get("kind"), why=why or str(error.get("message") or ""),
                                 kept=kept if isinstance(kept, int) else None,
                                 resumed_at_step=resumed if isinstance(resumed, int) else None))
    asked = {p.for_job for p in out if p.for_job is not None}
    if asked:
        own = set(session.scalars(select(Job.id).where(Job.id.in_(asked), Job.team_id == team_id)))
        for p in out:
            if p.for_job not in own:
                p.for_job = None
    return out
