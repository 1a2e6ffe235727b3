"""When each job's state was last confirmed by its backend (`jobs.state_observed_at`).

A backend that follows its jobs on a call budget (Vertex AI) refreshes each job's state
less often when it has many: the job view says how old the state is ("state as of 40 s
ago"). The backend reports (Backend.observed) which states it confirmed and when; this
stores them, one statement per (state, instant) for a batch, and only where the job is
still in that state and the stamp moves forward, so a stamp is always a true statement
about the state the row holds. Not a change of the job: `updated_at` stays as it is
(a confirmation is no news for the UI's live feed or the webhooks)."""
from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import datetime

from sqlalchemy import or_, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from service.lifecycle.states import JobState
from service.persistence.models import Job

log = logging.getLogger("trainjobs.lifecycle.loop")


def stamp(session: Session, confirmed: dict[uuid.UUID, tuple[JobState, datetime]]) -> None:
    """Best effort: a stamp lost to a busy database is taken again at the next confirmation."""
    if not confirmed:
        return
    groups: dict[tuple[JobState, datetime], list[uuid.UUID]] = defaultdict(list)
    for job_id, (state, at) in confirmed.items():
        groups[(state, at)].append(job_id)
    try:
        for (state, at), ids in groups.items():
            session.execute(update(Job).where(Job.id.in_(ids), Job.state == state.value,
                                              or_(Job.state_observed_at.is_(None), Job.state_observed_at < at))
                            .values(state_observed_at=at).execution_options(synchronize_session=False))
        session.commit()
    except OperationalError:
        session.rollback()
        log.warning("could not record when %d jobs' states were confirmed; next confirmation", len(confirmed))
