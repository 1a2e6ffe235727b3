"""Submitting a job to Vertex AI at most once.

At most one CustomJob per job. Creating one is not idempotent at Google, so our job
id travels in the `trainjobs_job_id` label and every create after an earlier attempt
is preceded by a lookup of that label (a job never attempted cannot have a CustomJob
yet, so it is created at once). The lifecycle records (and commits) every launch
attempt before submit() is called, whichever controller makes it; after an attempt whose
outcome is unknown (timeout, 5xx, crash, a deposed controller) submit() only looks the
label up, and creates again only once that attempt can no longer land: the grace
(`vertex_submit_grace_seconds`) exceeds the longest a lookup plus a create may take,
which config.py checks at start-up. A 429 is a refusal: nothing to wait for.

One try per pass: a transient failure leaves the job QUEUED and a later pass looks
it up again; a spent budget costs the pass nothing but the job's reason."""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from google.cloud import aiplatform_v1 as v1

from service.backends.vertex import errors
from service.backends.vertex.attempts import LaunchAttempts
from service.backends.vertex.budget import CREATE, CRUD, Bucket, BudgetSpent, GoogleBudget
from service.backends.vertex.jobs_api import JobsApi
from service.backends.vertex.settings import VertexSettings
from service.jobspec import CompiledJob
from service.lifecycle.protocol import JobHandle, PermanentBackendError, SubmitResult, TransientBackendError

log = logging.getLogger("trainjobs.vertex")


class Submitter:
    def __init__(self, settings: VertexSettings, budget: GoogleBudget, attempts: LaunchAttempts, *,
                 calls: Callable[[], JobsApi], console_url: Callable[[str], str],
                 effective: Callable[[uuid.UUID, CompiledJob], CompiledJob],
                 in_snapshot: Callable[[JobHandle], v1.CustomJob | None],
                 launched: Callable[[str], None] = lambda job_id: None):
        self.settings = settings
        self.budget = budget
        self.attempts = attempts
        self._calls = calls              # the started backend's JobsApi
        self._console_url = console_url
        self._effective = effective      # the job as it goes to Vertex (the service's defaults added)
        self._in_snapshot = in_snapshot  # the current listing (poller.py), free to read
        self._launched = launched        # tells the poller a CustomJob came to be now

    def submit(self, job: JobHandle) -> SubmitResult:
        """Look the label up; create only if no earlier attempt can still land."""
        jid = str(job.id)
        settling = self.attempts.may_land(job)
        seen = self._in_snapshot(job)
        if seen is not None:
            return self._adopted(job, seen)
        if settling:
            if not self.attempts.lookup_due(jid):
                return SubmitResult(reason=self._settling_reason())
        else:
            for bucket, what in ((self.budget.create, "create"), (self.budget.vertex, "call")):
                if bucket.wait_time() > 0:
                    return SubmitResult(reason=budget_reason(bucket, what), nothing_launched=True)
        if self.attempts.never_attempted(job):
            # No earlier attempt was ever recorded (the lifecycle commits one before every
            # submit, and forgets it only when it launched nothing): no CustomJob can carry
            # this job's label yet, so the lookup could only say "none". Skipping it lets new
            # jobs launch while customJobs.list is refused (429/503) and creates still answer.
            return self._create(job)
        try:
            existing = self._calls().find_by_label(job)
        except BudgetSpent as e:
            return SubmitResult(reason=budget_reason(self.budget[e.kind], "request" if e.kind == CRUD else "call"),
                                nothing_launched=True)
        except Exception as e:  # noqa: BLE001
            err = errors.as_backend_error(e, "looking the job up before creating it")
            if isinstance(err, TransientBackendError):
                # A lookup creates nothing.
                err = TransientBackendError(errors.retry_note(err, self.budget.crud), nothing_launched=True)
            raise err from e
        self.attempts.looked_up(jid)
        if existing:
            return self._adopted(job, existing[0])
        if settling:
            return SubmitResult(reason=self._settling_reason())
        return self._create(job)

    def _create(self, job: JobHandle) -> SubmitResult:
        jid = str(job.id)
        try:
            created = self._calls().create(v1.CustomJob.from_json(self._effective(job.id, job.compiled)
                                                                   .custom_job_json))
        except BudgetSpent as e:
            return SubmitResult(reason=budget_reason(self.budget[e.kind], "create" if e.kind == CREATE else "call"),
                                nothing_launched=True)
        except Exception as e:  # noqa: BLE001
            err = errors.as_backend_error(e, "creating the CustomJob")
            if isinstance(err, PermanentBackendError):
                self.attempts.forget(jid)   # the job fails: nothing left to look up
            elif err.nothing_launched:       # a 429: refused, nothing created
                err = TransientBackendError(errors.retry_note(err, self.budget.create), nothing_launched=True)
            else:                            # it may have landed all the same
                err = TransientBackendError(f"{err}; looked up by its label from the next pass (every "
                                            f"{self.settings.vertex_poll_interval_seconds:g} s), created again only "
                                            f"if absent {self.settings.vertex_submit_grace_seconds:g} s after "
                                            "this attempt")
            raise err from e
        self.attempts.forget(jid)
        self._launched(jid)
        log.info("job %s: created CustomJob %s", jid, created.name)
        return SubmitResult(backend_ref=created.name, console_url=self._console_url(created.name),
                            reason=f"created CustomJob {created.name}")

    def _adopted(self, job: JobHandle, cj: v1.CustomJob) -> SubmitResult:
        self.attempts.forget(str(job.id))
        self._launched(str(job.id))
        log.warning("job %s: CustomJob %s already exists with our label; adopting it", job.id, cj.name)
        return SubmitResult(backend_ref=cj.name, console_url=self._console_url(cj.name),
                            reason=f"adopted CustomJob {cj.name}, found by its label")

    def _settling_reason(self) -> str:
        return (f"an earlier create attempt may still land; looking it up by its label (every "
                f"{self.settings.vertex_poll_interval_seconds:g} s) before creating again, for up to "
                f"{self.settings.vertex_submit_grace_seconds:g} s after the attempt")


def budget_reason(bucket: Bucket, what: str) -> str:
    """Why a job waits in QUEUED for the budget, naming the setting that sizes it."""
    why = "paused after Vertex AI answered 429" if bucket.paused() else \
        f"{bucket.per_minute:g} a minute, {bucket.capacity:g} at once"
    setting = "TRAINJOBS_VERTEX_CREATE_PER_MINUTE" if what == "create" else "TRAINJOBS_VERTEX_CALLS_PER_MINUTE"
    return f"waiting for the Vertex AI {what} budget ({why}; {setting})"
