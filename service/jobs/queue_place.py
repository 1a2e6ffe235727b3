"""A waiting job's place in its backend's queue, for its views (GET /v1/jobs/{id}, the UI's job
page). The place comes from the shared capacity domain's cached computation (the app hands over
its QueueCache, service/capacity/queue_cache.py, through this protocol), built by the same
function that builds the job's entry in GET /v1/queue (service/capacity/queue.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from service.capacity import queue
from service.capacity.queue_schemas import QueuePlace
from service.lifecycle.states import JobState
from service.persistence.models import Job


class QueueReads(Protocol):
    def get(self, backend: str) -> queue.Computed: ...


def queue_place(reads: QueueReads, backends: Mapping, job: Job) -> QueuePlace | None:
    """None, with no computation at all, for a job that does not wait (launched, ended, on a
    backend not enabled here): their views stay as fast as they were. The caller has checked
    that the reader may see the job."""
    if job.state != JobState.QUEUED.value or job.backend_ref is not None or job.backend not in backends:
        return None
    return queue.place(reads.get(job.backend), job.id, job.priority_class)
