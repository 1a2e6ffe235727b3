"""The vertex backend: jobs run as Vertex AI CustomJobs, through the official
clients (aiplatform_v1.JobServiceClient over REST, google-cloud-logging).

Creating a CustomJob is not idempotent at Google, so our job id travels in the
`trainjobs-job-id` label and every create is preceded by a lookup of that label.
The lifecycle records (and commits) every launch attempt before submit() is
called, whichever controller makes it; after an attempt whose outcome is unknown
(timeout, crash, a deposed controller) submit() only looks the label up, and
creates again only once that attempt can no longer land
(`vertex_submit_grace_seconds`).

Polling costs a few list calls per batch, not one call per job: one paged list
of our unfinished CustomJobs created since the batch's oldest job, and, only when
some jobs of the batch were not in it, one paged list of our ended CustomJobs
created since the oldest of those."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Sequence

from google.api_core.client_options import ClientOptions
from google.api_core import exceptions as gexc
from google.auth.transport.requests import AuthorizedSession
from google.cloud import aiplatform_v1 as v1
from google.cloud import logging as cloud_logging
from google.protobuf import field_mask_pb2

from service.lifecycle.protocol import (Backend, Capabilities, JobHandle, LogPage, Observation,
                                        PermanentBackendError, SubmitResult,
                                   TransientBackendError)
from service.backends.vertex import config as vconfig
from service.backends.vertex import errors, logs, mapping
from service.config import Settings
from service.errors import DomainError, Problem
from service.lifecycle.states import JobState
from service.jobspec import CompiledJob

log = logging.getLogger("trainjobs.vertex")

MAX_SUBMITS_PER_POLL = 20      # creations the controller makes in one pass; the rest wait a pass
CANCEL_RESEND_SECONDS = 30.0   # a CANCELLING job Vertex still runs gets its cancel again after this


@dataclass(frozen=True)
class _Snapshot:
    pass_id: int
    since: datetime
    jobs: dict  # job id -> CustomJob


class LogsRefused(DomainError):
    """Cloud Logging said no for good (permission, bad filter): a problem answer, not a 500."""

    status, title, slug = 502, "Cloud Logging refused the request", "logs-refused"


class _TimeoutSession(AuthorizedSession):
    """google-cloud-logging's HTTP calls default to a 60 s timeout; cap it."""

    def __init__(self, credentials, timeout: float):
        super().__init__(credentials)
        self._cap = timeout

    def request(self, method, url, data=None, headers=None, max_allowed_time=None, timeout=None, **kwargs):
        if timeout is None or isinstance(timeout, tuple) or timeout > self._cap:
            timeout = self._cap
        return super().request(method, url, data=data, headers=headers, max_allowed_time=max_allowed_time,
                               timeout=timeout, **kwargs)


class VertexBackend(Backend):
    name = "vertex"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.capabilities = Capabilities(bulk_poll=True, max_running=settings.vertex_max_running_jobs,
                                         max_submits_per_pass=MAX_SUBMITS_PER_POLL,
                                         resubmit_after_seconds=settings.vertex_submit_grace_seconds,
                                         # Cloud Logging's read quota is 60 a minute per project.
                                         log_poll_seconds=5.0)
        self.config: vconfig.VertexConfig | None = None
        self._jobs: v1.JobServiceClient | None = None
        self._logging: cloud_logging.Client | None = None
        self._lock = threading.Lock()
        self._cancel_sent: dict[str, float] = {}    # job id -> monotonic time of the last cancel sent
        self._pass = 0                              # odd: inside a pass (begin_pass ... end_pass)
        self._snapshot: _Snapshot | None = None     # this pass's listing of our running CustomJobs

    # lifecycle -------------------------------------------------------------------------------
    def start_client(self) -> None:
        config, jobs_creds, logging_creds = vconfig.load(self.settings)
        self.config = config
        self._jobs = v1.JobServiceClient(transport="rest", credentials=jobs_creds,
                                         client_options=ClientOptions(api_endpoint=config.api_endpoint))
        self._logging = cloud_logging.Client(
            project=config.project, credentials=logging_creds, _use_grpc=False,
            _http=_TimeoutSession(logging_creds, config.request_timeout),
            client_options={"api_endpoint": config.logging_endpoint})
        log.info("vertex backend: project %s, %s, endpoint %s", config.project, config.location,
                 config.api_endpoint)

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.transport.close()
            self._jobs = None
        if self._logging is not None:
            self._logging.close()
            self._logging = None

    @property
    def client(self) -> v1.JobServiceClient:
        if self._jobs is None:
            raise RuntimeError("vertex backend not started")
        return self._jobs

    @property
    def cfg(self) -> vconfig.VertexConfig:
        if self.config is None:
            raise RuntimeError("vertex backend not started")
        return self.config

    # what the service asks ---------------------------------------------------------------------
    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        out = compiled.base_output_directory
        if out and not out.startswith("gs://"):
            return [Problem("base_output_directory",
                            f"Vertex AI writes model, checkpoints and TensorBoard logs to Cloud Storage, not {out!r}",
                            "use a gs://bucket/prefix URI (or leave it out to use the service's default)")]
        return []

    def submit(self, job: JobHandle) -> SubmitResult:
        """Look the label up; create only if no earlier attempt can still land. One try:
        a transient failure leaves the job QUEUED and the next pass looks it up again."""
        jid = str(job.id)
        try:
            existing = self._find_by_label(jid, retry=False)
        except Exception as e:  # noqa: BLE001
            err = self._translated(e, "looking the job up before creating it")
            if isinstance(err, TransientBackendError):
                err.nothing_launched = not self._attempt_may_land(job)  # this attempt created nothing
            raise err from e
        if existing:
            cj = existing[0]
            log.warning("job %s: CustomJob %s already exists with our label; adopting it", jid, cj.name)
            return SubmitResult(backend_ref=cj.name, console_url=self.cfg.console_url(cj.name),
                                reason=f"adopted CustomJob {cj.name}, found by its label")
        if self._attempt_may_land(job):
            return SubmitResult(reason="an earlier create attempt may still land; looking it up before "
                                       "creating again")
        try:
            # No client-side retry for create: a retry after a lost answer must look the label up first.
            created = self.client.create_custom_job(parent=self.cfg.parent, custom_job=self._custom_job(job),
                                                    retry=None, timeout=self.cfg.request_timeout)
        except Exception as e:  # noqa: BLE001
            raise self._translated(e, "creating the CustomJob") from e
        log.info("job %s: created CustomJob %s", jid, created.name)
        return SubmitResult(backend_ref=created.name, console_url=self.cfg.console_url(created.name),
                            reason=f"created CustomJob {created.name}")

    def _attempt_may_land(self, job: JobHandle) -> bool:
        prev = job.launch_attempted_at
        return prev is not None and (datetime.now(timezone.utc) - prev).total_seconds() < self.cfg.submit_grace

    def begin_pass(self) -> None:
        """The controller starts a pass over all our active jobs (oldest first, in batches)."""
        with self._lock:
            self._pass += 1
            self._snapshot = None

    def end_pass(self) -> None:
        """Outside a pass nothing is reused: every poll lists afresh."""
        with self._lock:
            self._pass += 1
            self._snapshot = None

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        if not jobs:
            return []
        running = self._running_since(min(j.created_at for j in jobs))
        found = {str(j.id): running[str(j.id)] for j in jobs if str(j.id) in running}
        missing = [j for j in jobs if str(j.id) not in found]
        ended_known = True
        if missing:
            try:
                self._scan(mapping.ended_filter(min(j.created_at for j in missing)),
                           {str(j.id): j for j in missing}, found, stop_when_all=True)
            except TransientBackendError as e:
                log.warning("vertex: listing ended jobs failed, will retry next tick: %s", e)
                ended_known = False
        out: list[Observation] = []
        for job in jobs:
            jid = str(job.id)
            cj = found.get(jid)
            if cj is not None:
                obs = mapping.observe(job, cj, self.cfg.console_url(cj.name),
                                      adopted_reason=f"adopted CustomJob {cj.name}, found by its "
                                                     f"{mapping.JOB_ID_LABEL} label")
                self._maybe_resend_cancel(job, cj)
            elif not ended_known:
                continue
            else:
                obs = self._settle_missing(job)
            if obs is not None:
                out.append(obs)
        return out

    def cancel(self, job: JobHandle) -> JobState | None:
        names = [job.backend_ref] if job.backend_ref else []
        if not names:
            try:
                names = [cj.name for cj in self._find_by_label(str(job.id), retry=True)]
            except Exception as e:  # noqa: BLE001 - sorted by translate
                raise self._translated(e, "looking up the job to cancel") from e
            if not names:
                # Not CANCELLED yet: an earlier create attempt may still land. Poll settles it:
                # CANCELLED once none can, or a cancel sent to what landed.
                return None
        for name in names:
            self._cancel(job, name)
        return None

    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        if self._logging is None:
            raise RuntimeError("vertex backend not started")
        policy = errors.retry_policy(self.cfg.retry_initial, self.cfg.retry_deadline)
        try:
            return policy(logs.read_page)(self._logging, self.cfg.project, job, replica=replica, since=since,
                                          limit=max(1, min(limit, logs.MAX_PAGE)))
        except Exception as e:  # noqa: BLE001
            if not errors.is_google_error(e):
                raise
            err = self._translated(e, "reading logs from Cloud Logging")
            if isinstance(err, TransientBackendError):
                raise err from e
            raise LogsRefused(f"Cloud Logging refused to read this job's logs: {err.message}",
                              backend_code=err.code) from e

    def _custom_job(self, job: JobHandle) -> v1.CustomJob:
        cj = job.compiled.custom_job()
        cj.labels[mapping.JOB_ID_LABEL] = str(job.id)
        spec = cj.job_spec
        if self.cfg.base_output_directory and not spec.base_output_directory.output_uri_prefix:
            spec.base_output_directory = v1.GcsDestination(
                output_uri_prefix=f"{self.cfg.base_output_directory}/{job.id}")
        if self.cfg.service_account and not spec.service_account:
            spec.service_account = self.cfg.service_account
        return cj

    def _settle_missing(self, job: JobHandle) -> Observation | None:
        """A job of the batch that neither list showed."""
        jid = str(job.id)
        if job.backend_ref:
            # We created it, yet no list shows it: ask for it by name (rare; e.g. deleted on Vertex).
            try:
                cj = self.client.get_custom_job(name=job.backend_ref, retry=self._retry(),
                                                timeout=self.cfg.request_timeout)
            except gexc.NotFound:
                ended = JobState.CANCELLED if job.state == JobState.CANCELLING else JobState.FAILED
                message = f"CustomJob {job.backend_ref} no longer exists on Vertex AI (deleted outside trainjobs)"
                return Observation(job_id=job.id, state=ended, reason=message,
                                   error={"code": 5, "status": "NOT_FOUND", "message": message, "source": "vertex"})
            except Exception as e:  # noqa: BLE001
                log.warning("job %s: get %s failed: %s", jid, job.backend_ref, e)
                return None
            return mapping.observe(job, cj, self.cfg.console_url(cj.name))
        if job.state == JobState.CANCELLING and not self._attempt_may_land(job):
            return Observation(job_id=job.id, state=JobState.CANCELLED,
                               reason="cancelled before it reached Vertex AI")
        return None  # an attempt may still land: the next pass looks again

    # cancel -------------------------------------------------------------------------------------
    def _cancel(self, job: JobHandle, name: str) -> None:
        try:
            self.client.cancel_custom_job(name=name, retry=self._retry(), timeout=self.cfg.request_timeout)
        except (gexc.FailedPrecondition, gexc.NotFound, gexc.BadRequest) as e:
            # Already ended (or gone): poll reports how it ended.
            log.info("job %s: cancel of %s refused (%s); poll will report its end", job.id, name, e)
        except Exception as e:  # noqa: BLE001
            raise self._translated(e, "cancelling the CustomJob") from e
        with self._lock:
            self._cancel_sent[str(job.id)] = time.monotonic()

    def _maybe_resend_cancel(self, job: JobHandle, cj: v1.CustomJob) -> None:
        if job.state != JobState.CANCELLING or mapping.our_state(cj) not in (
                JobState.QUEUED, JobState.PENDING, JobState.RUNNING, JobState.PAUSED, JobState.UPDATING):
            return
        with self._lock:
            sent = self._cancel_sent.get(str(job.id))
        if sent is not None and time.monotonic() - sent < CANCEL_RESEND_SECONDS:
            return
        try:
            self._cancel(job, cj.name)
        except TransientBackendError as e:
            log.warning("job %s: cancel still not through: %s", job.id, e)
        except PermanentBackendError as e:
            # One job's refusal (e.g. no permission to cancel) must not stop the whole poll;
            # the job stays CANCELLING and ends however Vertex ends it.
            log.error("job %s: Vertex AI refused the cancel: %s", job.id, e.message)
            with self._lock:
                self._cancel_sent[str(job.id)] = time.monotonic()

    # reading Vertex -----------------------------------------------------------------------------
    def _retry(self):
        return errors.retry_policy(self.cfg.retry_initial, self.cfg.retry_deadline)

    def _list(self, filter_: str, *, page_size: int | None = None, retry: bool = True,
              fields: list[str] | None = None) -> Iterable[v1.CustomJob]:
        request = v1.ListCustomJobsRequest(parent=self.cfg.parent, filter=filter_,
                                           page_size=page_size or self.cfg.page_size)
        if fields:
            request.read_mask = field_mask_pb2.FieldMask(paths=fields)
        pager = self.client.list_custom_jobs(request=request, retry=self._retry() if retry else None,
                                             timeout=self.cfg.request_timeout)
        return pager

    def _find_by_label(self, jid: str, *, retry: bool) -> list[v1.CustomJob]:
        """Every CustomJob carrying this job id, the one poll follows first."""
        jobs = list(self._list(mapping.label_filter(jid), page_size=10, retry=retry,
                               fields=mapping.POLL_FIELDS))
        return sorted(jobs, key=lambda cj: _name_key(cj.name))

    def _running_since(self, since: datetime) -> dict[str, v1.CustomJob]:
        """Our unfinished CustomJobs created since `since`, by job id. Within one reconcile
        pass the first batch's listing (the oldest bound) serves the later batches too; a
        job created after it was taken is simply missing, and found by the fallbacks."""
        with self._lock:
            snap, current = self._snapshot, self._pass
        if snap is not None and current % 2 == 1 and snap.pass_id == current and snap.since <= since:
            return snap.jobs
        jobs: dict[str, v1.CustomJob] = {}
        self._scan(mapping.running_filter(since), None, jobs)
        if current % 2 == 1:
            with self._lock:
                if self._pass == current:
                    self._snapshot = _Snapshot(current, since, jobs)
        return jobs

    def _scan(self, filter_: str, wanted: dict[str, JobHandle] | None, found: dict[str, v1.CustomJob], *,
              stop_when_all: bool = False) -> None:
        """Page through a list, keeping the CustomJobs of `wanted` jobs. Should two carry one
        job's label (never made by us), the lower name wins, the same one every tick."""
        try:
            for cj in self._list(filter_, fields=mapping.POLL_FIELDS):
                jid = cj.labels.get(mapping.JOB_ID_LABEL)
                if jid is None or (wanted is not None and jid not in wanted):
                    continue
                seen = found.get(jid)
                if seen is None or _name_key(cj.name) < _name_key(seen.name):
                    if seen is not None:
                        log.warning("job %s: two CustomJobs carry its label (%s, %s); following %s",
                                    jid, seen.name, cj.name, cj.name)
                    found[jid] = cj
                if stop_when_all and wanted is not None and all(k in found for k in wanted):
                    return
        except Exception as e:  # noqa: BLE001
            raise self._translated(e, "listing CustomJobs") from e

    @staticmethod
    def _translated(exc: BaseException, what: str) -> TransientBackendError | PermanentBackendError:
        if isinstance(exc, (TransientBackendError, PermanentBackendError)):
            return exc
        if not errors.is_google_error(exc):
            raise exc
        return errors.translate(exc, what)


def _name_key(name: str) -> tuple[int, str]:
    numeric = name.rsplit("/", 1)[-1]
    return (len(numeric), numeric)
