"""Cancelling CustomJobs, and sending a cancel again to one that Vertex still runs.

Vertex's cancel is asynchronous and best effort: the job goes CANCELLING and ends
CANCELLED, or not. A job still active on Vertex `CANCEL_RESEND_SECONDS` after our
cancel gets it again on a later poll. Timed on the real monotonic clock (cancels come
from the controller thread and from request threads: a lock guards the record)."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1

from service.backends.vertex import errors, mapping
from service.backends.vertex.budget import BudgetSpent
from service.backends.vertex.jobs_api import JobsApi
from service.lifecycle.protocol import JobHandle, PermanentBackendError, TransientBackendError
from service.lifecycle.states import JobState

log = logging.getLogger("trainjobs.vertex")

CANCEL_RESEND_SECONDS = 30.0   # a CANCELLING job Vertex still runs gets its cancel again after this
ACTIVE_ON_VERTEX = (JobState.QUEUED, JobState.PENDING, JobState.RUNNING, JobState.PAUSED, JobState.UPDATING)


class Cancels:
    def __init__(self, calls: Callable[[], JobsApi]):
        self._calls = calls
        self._lock = threading.Lock()
        self._sent: dict[str, float] = {}   # job id -> monotonic time of the last cancel sent

    def send(self, job: JobHandle, name: str) -> None:
        """Ask Vertex to cancel one CustomJob of the job; one already ended is no error."""
        try:
            self._calls().cancel(name)
        except (gexc.FailedPrecondition, gexc.NotFound, gexc.BadRequest) as e:
            # Already ended (or gone): poll reports how it ended.
            log.info("job %s: cancel of %s refused (%s); poll will report its end", job.id, name, e)
        except BudgetSpent as e:
            raise TransientBackendError(f"cancelling the CustomJob: {e}") from e
        except Exception as e:  # noqa: BLE001
            err = errors.as_backend_error(e, f"cancelling {name}")
            if isinstance(err, TransientBackendError):
                raise TransientBackendError(errors.retry_note(err, self._calls().budget.crud)) from e
            raise err from e
        self._record(job)

    def resend_if_due(self, job: JobHandle, cj: v1.CustomJob) -> None:
        if job.state != JobState.CANCELLING or mapping.our_state(cj) not in ACTIVE_ON_VERTEX:
            return
        with self._lock:
            sent = self._sent.get(str(job.id))
        if sent is not None and time.monotonic() - sent < CANCEL_RESEND_SECONDS:
            return
        try:
            self.send(job, cj.name)
        except TransientBackendError as e:
            log.warning("job %s: cancel still not through: %s", job.id, e)
        except PermanentBackendError as e:
            # One job's refusal (e.g. no permission to cancel) must not stop the whole poll;
            # the job stays CANCELLING and ends however Vertex ends it.
            log.error("job %s: Vertex AI refused the cancel: %s", job.id, e.message)
            self._record(job)

    def clear(self) -> None:
        with self._lock:
            self._sent.clear()

    def _record(self, job: JobHandle) -> None:
        with self._lock:
            self._sent[str(job.id)] = time.monotonic()
