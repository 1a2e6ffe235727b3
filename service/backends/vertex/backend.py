"""The vertex backend: jobs run as Vertex AI CustomJobs, through the official
clients (aiplatform_v1.JobServiceClient over REST, google-cloud-logging).

At most one CustomJob per job. Creating one is not idempotent at Google, so our job
id travels in the `trainjobs_job_id` label and every create after an earlier attempt
is preceded by a lookup of that label (a job never attempted cannot have a CustomJob
yet, so it is created at once). The lifecycle records (and commits) every launch
attempt before submit() is called, whichever controller makes it; after an attempt whose outcome is
unknown (timeout, 5xx, crash, a deposed controller) submit() only looks the label up,
and creates again only once that attempt can no longer land: the grace
(`vertex_submit_grace_seconds`) exceeds the longest a lookup plus a create may take,
which config.py checks at start-up. A 429 is a refusal: nothing to wait for.

Every call to Google goes through the budget (budget.py), one attempt each: the
controller never waits for a token nor retries inside a pass, so an outage or a spent
budget costs a pass nothing but a log line. Following costs a few list calls per
`vertex_poll_interval_seconds`, not one call per job: one paged list of our
unfinished CustomJobs created since the batch's oldest job, and only for jobs not in
it, one paged list of our ended ones (stopping once all are found)."""
from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.cloud import aiplatform_v1 as v1
from google.cloud import logging as cloud_logging

from service.backends.vertex import config as vconfig
from service.backends.vertex import errors, logs, mapping, model_upload, resources, view
from service.backends.vertex.budget import BudgetSpent, GoogleBudget
from service.backends.vertex.jobs_api import JobsApi
from service.backends.vertex.progress_reader import ProgressReader
from service.core.config import Settings
from service.core.errors import DomainError, Problem, Unavailable
from service.jobspec import CompiledJob
from service.lifecycle.protocol import (
    Backend,
    Capabilities,
    JobHandle,
    LaunchView,
    LogPage,
    Observation,
    PermanentBackendError,
    SubmitResult,
    TransientBackendError,
)
from service.lifecycle.states import TERMINAL, JobState

log = logging.getLogger("trainjobs.vertex")

MAX_SUBMITS_PER_POLL = 20      # creations the controller makes in one pass; the rest wait a pass
CANCEL_RESEND_SECONDS = 30.0   # a CANCELLING job Vertex still runs gets its cancel again after this
MAX_TAILS_PER_LOG = 64        # followers of one log at different points, remembered
ACTIVE_ON_VERTEX = (JobState.QUEUED, JobState.PENDING, JobState.RUNNING, JobState.PAUSED, JobState.UPDATING)


@dataclass(frozen=True)
class _Snapshot:
    pass_id: int
    since: datetime
    jobs: dict  # job id -> CustomJob


class LogsRefused(DomainError):
    """Cloud Logging said no for good (permission, bad filter): a problem answer, not a 500."""

    status, title, slug = 502, "Cloud Logging refused the request", "logs-refused"


class LogsBudgetSpent(Unavailable):
    """The Cloud Logging read budget is truly spent: 503 with Retry-After."""

    title, slug = "Cloud Logging read budget spent", "logs-budget-spent"


class VertexBackend(Backend):
    name = "vertex"

    def __init__(self, settings: Settings, *, budget: GoogleBudget | None = None):
        self.settings = settings
        self.capabilities = Capabilities(bulk_poll=True, max_running=settings.vertex_max_running_jobs,
                                         max_submits_per_pass=MAX_SUBMITS_PER_POLL,
                                         resubmit_after_seconds=settings.vertex_submit_grace_seconds,
                                         # Cloud Logging's read quota is 60 a minute per project.
                                         log_poll_seconds=5.0)
        self.budget = budget or GoogleBudget.from_settings(settings)
        self.config: vconfig.VertexConfig | None = None
        self.api: JobsApi | None = None
        self._jobs: v1.JobServiceClient | None = None
        self._models: v1.ModelServiceClient | None = None
        self.uploader = model_upload.ModelUploader(self)
        self._logging: cloud_logging.Client | None = None
        self._logging_session: logs.BudgetedSession | None = None
        self._lock = threading.Lock()
        # The clock launch attempts are measured by (the lifecycle stamps them in UTC).
        self._now = lambda: datetime.now(UTC)
        self._mono = time.monotonic
        self._cancel_sent: dict[str, float] = {}    # job id -> monotonic time of the last cancel sent
        self._looked_up: dict[str, float] = {}     # job id -> last label lookup while an attempt settles
        self._pass = 0                              # odd: inside a pass (begin_pass ... end_pass)
        self._snapshot: _Snapshot | None = None     # this pass's listing of our running CustomJobs
        self._list_due = True                       # this pass lists (vertex_poll_interval_seconds)
        self._listed_at: float | None = None        # monotonic time of the last listing attempt
        self.progress = ProgressReader(settings.vertex_progress_interval_seconds, wall=lambda: self._now())
        # (job id, replica) -> {cursor where a read came to the end of the log: when it was read}
        self._tails: dict[tuple, dict[str, float]] = {}
        self._tails_lock = threading.Lock()          # log reads come from many request threads

    # lifecycle -------------------------------------------------------------------------------
    def start_client(self) -> None:
        config, jobs_creds, logging_creds = vconfig.load(self.settings)
        self.config = config
        self._jobs = v1.JobServiceClient(transport="rest", credentials=jobs_creds,
                                         client_options=ClientOptions(api_endpoint=config.api_endpoint))
        self.api = JobsApi(self._jobs, parent=config.parent, request_timeout=config.request_timeout,
                           create_timeout=config.create_timeout, page_size=config.page_size, budget=self.budget)
        # The Model Registry (models.upload after success) answers on the same regional endpoint.
        self._models = v1.ModelServiceClient(transport="rest", credentials=jobs_creds,
                                             client_options=ClientOptions(api_endpoint=config.api_endpoint))
        self._logging_session = logs.BudgetedSession(logging_creds, config.request_timeout, self.budget.logging)
        self._logging = cloud_logging.Client(
            project=config.project, credentials=logging_creds, _use_grpc=False, _http=self._logging_session,
            client_options={"api_endpoint": config.logging_endpoint})
        log.info("vertex backend: project %s, %s, endpoint %s", config.project, config.location,
                 config.api_endpoint)

    def stop_controller(self) -> None:
        with self._lock:
            self._cancel_sent.clear()
            self._looked_up.clear()
        self.progress.clear()

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.transport.close()
            self._jobs = None
        if self._models is not None:
            self._models.transport.close()
            self._models = None
        if self._logging is not None:
            self._logging.close()
            self._logging = None

    @property
    def client(self) -> v1.JobServiceClient:
        if self._jobs is None:
            raise RuntimeError("vertex backend not started")
        return self._jobs

    @property
    def model_client(self) -> v1.ModelServiceClient:
        if self._models is None:
            raise RuntimeError("vertex backend not started")
        return self._models

    def after_pass(self, session_factory) -> None:
        self.uploader.run(session_factory)

    @property
    def cfg(self) -> vconfig.VertexConfig:
        if self.config is None:
            raise RuntimeError("vertex backend not started")
        return self.config

    @property
    def calls(self) -> JobsApi:
        if self.api is None:
            raise RuntimeError("vertex backend not started")
        return self.api

    # what the service asks ---------------------------------------------------------------------
    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        out = compiled.base_output_directory
        if out and not out.startswith("gs://"):
            return [Problem("base_output_directory",
                            f"Vertex AI writes model, checkpoints and TensorBoard logs to Cloud Storage, not {out!r}",
                            "use a gs://bucket/prefix URI (or leave it out to use the service's default)")]
        problems = resources.region_problems(compiled, self.config)
        if (compiled.vertex or {}).get("model_upload") and not out and not (self.config and
                                                                              self.config.base_output_directory):
            problems.append(Problem("model_upload", "the model to upload is what the trainer saves under "
                                    "AIP_MODEL_DIR, and this job has no output directory",
                                    "set base_output_directory (gs://...) in the template, or "
                                    "TRAINJOBS_VERTEX_BASE_OUTPUT_DIRECTORY for the service"))
        return problems

    def effective(self, job_id: uuid.UUID | str, compiled: CompiledJob) -> CompiledJob:
        """The job exactly as it goes to Vertex: the compiled one plus this service's defaults."""
        cfg = self.config
        return view.effective(compiled, job_id, base_output_directory=cfg.base_output_directory if cfg else None,
                              service_account=cfg.service_account if cfg else None,
                              project=cfg.project if cfg else None, location=cfg.location if cfg else None)

    def launch_view(self, job_id: uuid.UUID, compiled: CompiledJob, backend_ref: str | None) -> LaunchView:
        sent = self.effective(job_id, compiled)
        return view.launch_view(sent, resources.view(sent, self.config))

    # submit ---------------------------------------------------------------------------------------
    def submit(self, job: JobHandle) -> SubmitResult:
        """Look the label up; create only if no earlier attempt can still land. One try:
        a transient failure leaves the job QUEUED and a later pass looks it up again."""
        jid = str(job.id)
        settling = self._attempt_may_land(job)
        seen = self._in_snapshot(job)
        if seen is not None:
            return self._adopted(job, seen)
        if settling:
            last = self._looked_up.get(jid)
            if last is not None and self._mono() - last < self.settings.vertex_poll_interval_seconds:
                return SubmitResult(reason=self._settling_reason())
        else:
            wait = self.budget.create.wait_time()
            if wait > 0:
                return SubmitResult(reason=self._budget_reason(self.budget.create, "create"), nothing_launched=True)
        if self._never_attempted(job):
            # No earlier attempt was ever recorded (the lifecycle commits one before every
            # submit, and forgets it only when it launched nothing): no CustomJob can carry
            # this job's label yet, so the lookup could only say "none". Skipping it lets new
            # jobs launch while customJobs.list is refused (429/503) and creates still answer.
            return self._create(job)
        try:
            existing = self._find_by_label(job)
        except BudgetSpent:
            return SubmitResult(reason=self._budget_reason(self.budget.crud, "request"), nothing_launched=True)
        except Exception as e:  # noqa: BLE001
            err = self._translated(e, "looking the job up before creating it")
            if isinstance(err, TransientBackendError):
                err.nothing_launched = True  # a lookup creates nothing
            raise err from e
        self._looked_up[jid] = self._mono()
        if existing:
            return self._adopted(job, existing[0])
        if settling:
            return SubmitResult(reason=self._settling_reason())
        return self._create(job)

    def _create(self, job: JobHandle) -> SubmitResult:
        jid = str(job.id)
        try:
            created = self.calls.create(v1.CustomJob.from_json(self.effective(job.id, job.compiled).custom_job_json))
        except BudgetSpent:
            return SubmitResult(reason=self._budget_reason(self.budget.create, "create"), nothing_launched=True)
        except Exception as e:  # noqa: BLE001
            err = self._translated(e, "creating the CustomJob")
            if isinstance(err, PermanentBackendError):
                self._looked_up.pop(jid, None)   # the job fails: nothing left to look up
            raise err from e
        self._looked_up.pop(jid, None)
        log.info("job %s: created CustomJob %s", jid, created.name)
        return SubmitResult(backend_ref=created.name, console_url=self.cfg.console_url(created.name),
                            reason=f"created CustomJob {created.name}")

    def _adopted(self, job: JobHandle, cj: v1.CustomJob) -> SubmitResult:
        self._looked_up.pop(str(job.id), None)
        log.warning("job %s: CustomJob %s already exists with our label; adopting it", job.id, cj.name)
        return SubmitResult(backend_ref=cj.name, console_url=self.cfg.console_url(cj.name),
                            reason=f"adopted CustomJob {cj.name}, found by its label")

    def _settling_reason(self) -> str:
        return (f"an earlier create attempt may still land; looking it up by its label (every "
                f"{self.settings.vertex_poll_interval_seconds:g} s) before creating again, for up to "
                f"{self.cfg.submit_grace:g} s after the attempt")

    def _budget_reason(self, bucket, what: str) -> str:
        why = "paused after Vertex AI answered 429" if bucket.paused() else \
            f"{bucket.per_minute:g} a minute, {bucket.capacity:g} at once"
        setting = "TRAINJOBS_VERTEX_CREATE_PER_MINUTE" if what == "create" else "TRAINJOBS_VERTEX_CRUD_PER_MINUTE"
        return f"waiting for the Vertex AI {what} budget ({why}; {setting})"

    @staticmethod
    def _never_attempted(job: JobHandle) -> bool:
        """The handle is read before this attempt was recorded: None means no attempt before.
        A job compiled under the old label key may predate the recorded attempts: it is
        always looked up."""
        return (job.launch_attempted_at is None and not job.backend_ref
                and not mapping.is_legacy(job.compiled.custom_job_dict))

    def _attempt_may_land(self, job: JobHandle) -> bool:
        prev = job.launch_attempted_at
        return prev is not None and (self._now() - prev).total_seconds() < self.cfg.submit_grace

    def _in_snapshot(self, job: JobHandle) -> v1.CustomJob | None:
        """This pass's listing already shows the job's CustomJob (costs nothing)."""
        with self._lock:
            snap = self._snapshot if self._pass % 2 == 1 else None
        if snap is None or snap.pass_id != self._pass:
            return None
        return snap.jobs.get(str(job.id))

    # poll -----------------------------------------------------------------------------------------
    def begin_pass(self) -> None:
        """The controller starts a pass over all our active jobs (oldest first, in batches)."""
        now = self._mono()
        with self._lock:
            self._pass += 1
            self._snapshot = None
            interval = self.settings.vertex_poll_interval_seconds
            self._list_due = self._listed_at is None or now - self._listed_at >= interval

    def end_pass(self) -> None:
        """Outside a pass nothing is reused: every poll lists afresh."""
        with self._lock:
            self._pass += 1
            self._snapshot = None
            self._list_due = True

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        if not jobs:
            return []
        out: list[Observation] = []
        if self._list_due:
            try:
                out = self._observe(jobs)
            except BudgetSpent as e:
                log.info("vertex: not following jobs this pass: %s", e)
        progress = self._read_progress(jobs, out)
        if progress:
            out = _with_progress(out, progress)
        return _with_silences(out, jobs, self.progress)

    def _observe(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        running = self._running_since(min(j.created_at for j in jobs))
        found = {str(j.id): running[str(j.id)] for j in jobs if str(j.id) in running}
        listed = [j for j in jobs if j.backend_ref and str(j.id) not in found]
        ended_known = True
        if listed:
            try:
                self._find_ended(listed, found)
            except (TransientBackendError, BudgetSpent) as e:
                log.warning("vertex: listing ended jobs failed, will retry next pass: %s", e)
                ended_known = False
        out: list[Observation] = []
        for job in jobs:
            jid = str(job.id)
            cj = found.get(jid)
            if cj is None and not job.backend_ref:
                cj = self._late_create(job)
            if cj is not None:
                obs = mapping.observe(job, cj, self.cfg.console_url(cj.name),
                                      adopted_reason=f"adopted CustomJob {cj.name}, found by its label")
                self._maybe_resend_cancel(job, cj)
                self._follow_progress(job, cj)
            elif job.backend_ref and not ended_known:
                continue
            else:
                obs = self._settle_missing(job)
            if obs is not None:
                out.extend(mapping.with_missed_start(job, obs))
        return out

    def _find_ended(self, jobs: list[JobHandle], found: dict) -> None:
        """Jobs we created that the running list did not show: our ended CustomJobs, stopping
        as soon as all are found; those created before the label key lost its hyphen, by the
        old key."""
        wanted = {str(j.id): j for j in jobs}
        self._scan(mapping.ended_filter(min(j.created_at for j in jobs)), wanted, found, stop_when_all=True)
        legacy = {jid: j for jid, j in wanted.items()
                  if jid not in found and mapping.is_legacy(j.compiled.custom_job_dict)}
        if legacy:
            self._scan(mapping.legacy_filter(min(j.created_at for j in legacy.values())), legacy, found,
                       stop_when_all=True)

    def _late_create(self, job: JobHandle) -> v1.CustomJob | None:
        """A job with no CustomJob of ours yet (cancelled while its create attempt settles):
        looked up by label while that attempt may still land, at most once a poll interval."""
        jid = str(job.id)
        if not self._attempt_may_land(job):
            return None
        last = self._looked_up.get(jid)
        if last is not None and self._mono() - last < self.settings.vertex_poll_interval_seconds:
            return None
        try:
            found = self._find_by_label(job)
        except Exception as e:  # noqa: BLE001 - budget, outage: the next pass looks again
            log.info("job %s: label lookup deferred: %s", jid, e)
            return None
        self._looked_up[jid] = self._mono()
        return found[0] if found else None

    def cancel(self, job: JobHandle) -> JobState | None:
        names = [job.backend_ref] if job.backend_ref else []
        if not names:
            try:
                names = [cj.name for cj in self._find_by_label(job)]
            except BudgetSpent as e:
                raise TransientBackendError(f"looking up the job to cancel: {e}", nothing_launched=True) from e
            except Exception as e:  # noqa: BLE001 - sorted by translate
                raise self._translated(e, "looking up the job to cancel") from e
            self._looked_up[str(job.id)] = self._mono()
            if not names:
                # Not CANCELLED yet: an earlier create attempt may still land. Poll settles it:
                # CANCELLED once none can, or a cancel sent to what landed.
                return None
        try:
            for name in names:
                self._cancel(job, name)
        except PermanentBackendError:
            self.progress.ended(str(job.id))   # refused for good: the job ends all the same
            raise
        # Stopped: no replica of it is judged any more (a stalled job ends FAILED and leaves
        # the poll; its last lines are still read a few times, then it is forgotten).
        self.progress.ended(str(job.id))
        return None

    def _settle_missing(self, job: JobHandle) -> Observation | None:
        """A job of the batch that no list showed."""
        jid = str(job.id)
        if job.backend_ref:
            # We created it, yet no list shows it: ask for it by name (rare; e.g. deleted on Vertex).
            try:
                cj = self.calls.get(job.backend_ref)
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
            self._looked_up.pop(jid, None)
            return Observation(job_id=job.id, state=JobState.CANCELLED,
                               reason="cancelled before it reached Vertex AI")
        return None  # an attempt may still land: a later pass looks again

    # progress -------------------------------------------------------------------------------------
    def _follow_progress(self, job: JobHandle, cj: v1.CustomJob) -> None:
        state = mapping.our_state(cj)
        if state == JobState.RUNNING or (state in TERMINAL and cj.start_time):
            # A job with a stall timeout has its chief and workers judged (lifecycle/stalls.py),
            # a replica never heard of counted from Vertex's startTime.
            jid, numeric = str(job.id), cj.name.rsplit("/", 1)[-1]
            if state == JobState.RUNNING and not self.progress.running_known(jid):
                # Once per job (the compiled job is parsed only here).
                self.progress.follow(jid, numeric, job.created_at, watch=_judged_tasks(job),
                                     running_since=cj.start_time or self._now())
            else:
                self.progress.follow(jid, numeric, job.created_at)
        if state in TERMINAL:
            self.progress.ended(str(job.id))

    def _read_progress(self, jobs: Sequence[JobHandle], out: list[Observation]) -> dict[str, dict]:
        # A job that just ended is read at once (its last epochs), whatever the interval.
        ended_now = any(o.state in TERMINAL for o in out)
        if self._logging is None or not (self.progress.due() or ended_now):
            return {}
        return self.progress.read(self._logging, self._logging_session, self.cfg.project)

    # cancel -------------------------------------------------------------------------------------
    def _cancel(self, job: JobHandle, name: str) -> None:
        try:
            self.calls.cancel(name)
        except (gexc.FailedPrecondition, gexc.NotFound, gexc.BadRequest) as e:
            # Already ended (or gone): poll reports how it ended.
            log.info("job %s: cancel of %s refused (%s); poll will report its end", job.id, name, e)
        except BudgetSpent as e:
            raise TransientBackendError(f"cancelling the CustomJob: {e}") from e
        except Exception as e:  # noqa: BLE001
            raise self._translated(e, "cancelling the CustomJob") from e
        with self._lock:
            self._cancel_sent[str(job.id)] = time.monotonic()

    def _maybe_resend_cancel(self, job: JobHandle, cj: v1.CustomJob) -> None:
        if job.state != JobState.CANCELLING or mapping.our_state(cj) not in ACTIVE_ON_VERTEX:
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

    # logs ---------------------------------------------------------------------------------------
    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        """A page of a job's logs within the Cloud Logging budget.

        A read from a cursor where an earlier read of this job's log came to its end (a
        follower that has caught up) goes to Google at most once per follow interval for that
        cursor, never waits for a token and leaves the people's share of the budget alone:
        otherwise it answers "nothing new yet" and the lines come a little later. Any other
        read (a person's page) waits up to `logs_budget_wait_seconds` for a token, and only
        then answers 503 with Retry-After."""
        if self._logging is None:
            raise RuntimeError("vertex backend not started")
        limit = max(1, min(limit, logs.MAX_PAGE))
        key = (job.id, replica)
        now = self._mono()
        with self._tails_lock:
            read_at = (self._tails.get(key, {}).get(since) if since is not None and job.state not in TERMINAL
                       else None)
        at_tail = read_at is not None
        if at_tail and now - read_at < self._tail_interval(now):
            return LogPage(lines=[], cursor=since)
        bucket = self.budget.logging
        # A follower's read takes a token of the followers' share, never waits, and leaves the
        # people's part of the burst behind; a page may wait a moment.
        terms = (lambda: logs.Terms(reserve=bucket.capacity * (1 - self.settings.logs_follow_share),
                                    share=self.budget.follow)) if at_tail \
            else (lambda: logs.Terms(wait=self.settings.logs_budget_wait_seconds))
        policy = errors.retry_policy(self.cfg.retry_initial, self.cfg.retry_deadline)
        policy = policy.with_predicate(lambda e: errors.is_transient(e) and not errors.is_rate_limited(e))
        try:
            page = policy(lambda: logs.read_page(self._logging, self._logging_session, self.cfg.project, job,
                                                 replica=replica, since=since, limit=limit, terms=terms()))()
        except BudgetSpent as e:
            if at_tail:
                return LogPage(lines=[], cursor=since)   # a follower just sees its lines a little later
            raise LogsBudgetSpent(f"reading logs from Cloud Logging: {e}; retry after {e.retry_after_header} s",
                                  headers={"Retry-After": e.retry_after_header}) from None
        except Exception as e:  # noqa: BLE001
            if not errors.is_google_error(e):
                raise
            if errors.is_rate_limited(e):
                if at_tail:
                    return LogPage(lines=[], cursor=since)
                retry = str(max(1, math.ceil(bucket.wait_time())))
                raise LogsBudgetSpent(f"Cloud Logging answered 429 (its read quota is spent); retry after {retry} s",
                                      headers={"Retry-After": retry}) from None
            err = self._translated(e, "reading logs from Cloud Logging")
            if isinstance(err, TransientBackendError):
                raise err from e
            raise LogsRefused(f"Cloud Logging refused to read this job's logs: {err.message}",
                              backend_code=err.code) from e
        self._remember_tail(key, since, page, limit, now, job)
        return page

    def follow_interval(self, job: JobHandle, *, caught_up: bool, idle_seconds: float) -> float | None:
        """For a log follower (the SSE fan-out): read again at once while there is more;
        once caught up, every `logs_follow_min_seconds`, growing with quiet time up to
        `logs_follow_max_seconds`, and never so often that the jobs being followed together
        would use more than `logs_follow_share` of the Cloud Logging budget."""
        if not caught_up:
            return 0.0
        s = self.settings
        quiet = min(s.logs_follow_max_seconds, max(s.logs_follow_min_seconds, idle_seconds / 2))
        return max(quiet, self._tail_interval(self._mono()))

    def _tail_interval(self, now: float) -> float:
        """Seconds between reads from one follower's cursor: the minimum, or the followed
        jobs' share of the budget spread over all of them, whichever is longer."""
        s = self.settings
        horizon = 2 * s.logs_follow_max_seconds
        with self._tails_lock:
            followed = sum(1 for reads in self._tails.values() if reads and now - max(reads.values()) < horizon)
        share_per_second = self.budget.logging.rate * s.logs_follow_share
        return max(s.logs_follow_min_seconds, max(1, followed) / share_per_second)

    def _remember_tail(self, key: tuple, since: str | None, page: LogPage, limit: int, now: float,
                       job: JobHandle) -> None:
        """Where a read came to the end of the log so far: a follower reads on from there."""
        with self._tails_lock:
            self._remember_tail_locked(key, since, page, limit, now, job)

    def _remember_tail_locked(self, key: tuple, since: str | None, page: LogPage, limit: int, now: float,
                              job: JobHandle) -> None:
        if job.state in TERMINAL:
            self._tails.pop(key, None)
            return
        reads = self._tails.setdefault(key, {})
        if since is not None and since in reads:
            reads[since] = now
        if len(page.lines) < limit and page.cursor is not None:
            reads[page.cursor] = now
        while len(reads) > MAX_TAILS_PER_LOG:
            reads.pop(min(reads, key=reads.__getitem__))
        if len(self._tails) > 10_000:  # forget followers long gone
            horizon = 2 * self.settings.logs_follow_max_seconds
            for k, r in list(self._tails.items()):
                if not r or now - max(r.values()) > horizon:
                    self._tails.pop(k, None)

    # reading Vertex -----------------------------------------------------------------------------
    def _find_by_label(self, job: JobHandle) -> list[v1.CustomJob]:
        """Every CustomJob carrying this job's id, the one poll follows first. A job compiled
        before the label key lost its hyphen is looked up by the old key (its CustomJob carries
        that one, and the new one too if created since)."""
        legacy = mapping.is_legacy(job.compiled.custom_job_dict)
        jobs = list(self.calls.list(mapping.label_filter(str(job.id), legacy=legacy), page_size=10,
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
        self._listed_at = self._mono()
        self._scan(mapping.running_filter(since), None, jobs)
        if current % 2 == 1:
            with self._lock:
                if self._pass == current:
                    self._snapshot = _Snapshot(current, since, jobs)
        return jobs

    def _scan(self, filter_: str, wanted: dict[str, JobHandle] | None, found: dict[str, v1.CustomJob], *,
              stop_when_all: bool = False) -> None:
        """Page through a list, keeping the CustomJobs of `wanted` jobs; with `stop_when_all`,
        no further page is fetched once every wanted job is found. Should two carry one
        job's label (never made by us), the lower name wins, the same one every pass."""
        if stop_when_all and wanted is not None and all(k in found for k in wanted):
            return
        try:
            for cj in self.calls.list(filter_, fields=mapping.POLL_FIELDS):
                jid = mapping.job_id_of(cj)
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
        except BudgetSpent:
            raise
        except Exception as e:  # noqa: BLE001
            raise self._translated(e, "listing CustomJobs") from e

    @staticmethod
    def _translated(exc: BaseException, what: str) -> TransientBackendError | PermanentBackendError:
        if isinstance(exc, (TransientBackendError, PermanentBackendError)):
            return exc
        if not errors.is_google_error(exc):
            raise exc
        return errors.translate(exc, what)


def _with_progress(out: list[Observation], progress: dict[str, dict]) -> list[Observation]:
    """Each job's new progress, on its observation of this poll or on one of its own."""
    merged: list[Observation] = []
    for obs in out:
        p = progress.pop(str(obs.job_id), None)
        merged.append(dataclasses.replace(obs, progress=p) if p is not None else obs)
    merged += [Observation(job_id=uuid.UUID(jid), progress=p) for jid, p in progress.items()]
    return merged


def _judged_tasks(job: JobHandle) -> tuple[str, ...]:
    """The chief's and workers' task names, when the job has a stall timeout (else none:
    their every line is not worth reading)."""
    if not job.compiled.stall_timeout_seconds:
        return ()
    return tuple(r.task_name for r in job.compiled.replicas if r.tf_role in ("chief", "worker"))


def _with_silences(out: list[Observation], jobs: Sequence[JobHandle], reader: ProgressReader) -> list[Observation]:
    """The observed silence of each RUNNING job judged for stalls (a fact: the controller
    compares it with the job's stall timeout), on its observation of this poll or its own."""
    silences = {}
    for job in jobs:
        if job.state == JobState.RUNNING:
            silent = reader.silence(str(job.id))
            if silent is not None:
                silences[job.id] = silent
    if not silences:
        return out
    merged = [dataclasses.replace(o, silence=silences.pop(o.job_id)) if o.job_id in silences else o for o in out]
    return merged + [Observation(job_id=jid, silence=s) for jid, s in silences.items()]


def _name_key(name: str) -> tuple[int, str]:
    numeric = name.rsplit("/", 1)[-1]
    return (len(numeric), numeric)
