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
    if not _waits(job, backends):
        return None
    return reads.place(job.backend, job.id, job.priority_class)


def queue_places(reads: QueueReads, backends: Mapping, job: Job) -> dict[str, QueuePlace]:
    """A waiting job of several backends: its place in the queue of each backend it accepts that
    is enabled here, most preferred first (it waits in every one and starts on the first that
    admits it, docs/queue.md "Placement across backends"). Empty for a job of one backend (its
    `queue_place` says it all) and for a job that does not wait."""
    accepts = getattr(job, "accepts", None) or ()
    if len(accepts) < 2 or not _waits(job, backends):
        return {}
    names = [str(a["backend"]) for a in accepts]
    return {name: reads.place(name, job.id, job.priority_class) for name in names if name in backends}


def _waits(job: Job, backends: Mapping) -> bool:
    return job.state == JobState.QUEUED.value and job.backend_ref is None and job.backend in backends
