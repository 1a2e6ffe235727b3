"""A waiting job's place in its backend's queue, for its views (GET /v1/jobs/{id}, the UI's job
page). The place comes from the shared capacity domain's cached computation (the app hands over
its QueueCache, service/capacity/queue_cache.py, through this protocol), built by the same
computation that gives the job's entry in GET /v1/queue (service/capacity/queue_pages.py). A
waiting job that computation does not hold yet (submitted after it began) gets a place with no
position that says so, never null."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

from service.capacity.queue_schemas import QueuePlace
from service.lifecycle.states import JobState
from service.persistence.models import Job


class QueueReads(Protocol):
    def place(self, backend: str, job_id: uuid.UUID, priority_class: str | None) -> QueuePlace: ...


def queue_place(reads: QueueReads, backends: Mapping, job: Job) -> QueuePlace | None:
    """None, with no computation at all, for a job that does not wait (launched, ended, on a
    backend not enabled here): their views stay as fast as they were. The caller has checked
    that the reader may see the job."""
    if job.state != JobState.QUEUED.value or job.backend_ref is not None or job.backend not in backends:
        return None
    return reads.place(job.backend, job.id, job.priority_class)
