"""A waiting job's place in its backend's queue, for its views (GET /v1/jobs/{id}, the UI's job
page). The place comes from the shared capacity domain's cached computation, reached through
this protocol (service/capacity/queue_cache.py's QueueCache; the app hands it over), so the
jobs domain imports no other domain."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

from sqlalchemy.orm import Session

from service.jobs.schemas import QueuePlace
from service.lifecycle.admission import WaitingNote
from service.lifecycle.states import JobState
from service.persistence.models import Job


class QueueNotes(Protocol):
    def note(self, session: Session, backend: str, job_id: uuid.UUID) -> WaitingNote | None: ...


def queue_place(notes: QueueNotes, backends: Mapping, session: Session, job: Job) -> QueuePlace | None:
    """None, with no computation at all, for a job that does not wait (launched, ended, on a
    backend not enabled here): their views stay as fast as they were."""
    if job.state != JobState.QUEUED.value or job.backend_ref is not None or job.backend not in backends:
        return None
    note = notes.note(session, job.backend, job.id)
    if note is None:
        return None
    return QueuePlace(position=note.position, why=note.why, ahead=note.ahead, estimated_start=note.estimated_start,
                      likely_start=note.likely_start)
