"""The vertex backend: jobs run as Vertex AI CustomJobs, through the official clients
(aiplatform_v1.JobServiceClient over REST, google-cloud-logging).

This is the class the controller's BackendLoop drives and the API asks; it reports
facts and holds no logic of its own beyond wiring its parts, each in its own module:

    settings.py   the slice of the service settings it is given (VertexSettings)
    config.py     those settings checked at start-up; clients.py: the clients made from them
    budget.py     the Google-call budget: every Vertex AI call in the region, creates, logging
    jobs_api.py   every CustomJob call, one budgeted attempt each; lookups by our label
    submit.py     submitting at most once (label lookups while an attempt settles: attempts.py)
    poller.py     following states, progress and silences as Observations
    cancels.py    cancelling, and cancelling again what Vertex still runs
    log_reader.py a job's log pages for the API, within the Cloud Logging budget
                  (logs.py: the wire; problems.py: the 502/503 answers)
    model_client.py  the Model Registry calls of an upload after success (the domain's
                     service/model_uploads/ runs them)

Every call to Google goes through the budget, one attempt each: the controller never
waits for a token nor retries inside a pass, so an outage or a spent budget costs a
pass nothing but a log line."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

from google.cloud import aiplatform_v1 as v1

from service.backends.vertex import config as vconfig
from service.backends.vertex import errors, resources, view
from service.backends.vertex.attempts import LaunchAttempts
from service.backends.vertex.budget import BudgetSpent, GoogleBudget
from service.backends.vertex.cancels import Cancels
from service.backends.vertex.clients import Clients, connect
from service.backends.vertex.clock import Clock
from service.backends.vertex.jobs_api import JobsApi
from service.backends.vertex.log_reader import LogReader
from service.backends.vertex.model_client import VertexModelClient
from service.backends.vertex.poller import Poller
from service.backends.vertex.progress_reader import ProgressReader
from service.backends.vertex.settings import VertexSettings
from service.backends.vertex.submit import Submitter
from service.core.errors import Problem
from service.core.off_seat import waiting_elsewhere
from service.jobspec import CompiledJob
from service.jobspec.machines import pool_demand
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
from service.lifecycle.states import JobState

MAX_SUBMITS_PER_POLL = 20      # creations the controller makes in one pass; the rest wait a pass


class VertexBackend(Backend):
    name = "vertex"

    def __init__(self, settings: VertexSettings, *, budget: GoogleBudget | None = None):
        self.settings = settings
        self.capabilities = Capabilities(bulk_poll=True, max_running=settings.vertex_max_running_jobs,
                                         max_submits_per_pass=MAX_SUBMITS_PER_POLL,
                                         resubmit_after_seconds=settings.vertex_submit_grace_seconds,
                                         # Cloud Logging's read quota is 60 a minute per project.
                                         log_poll_seconds=5.0, preempts=True,
                                         # A job's output is on Cloud Storage, which no other backend here reads.
                                         output_root=settings.vertex_base_output_directory or "gs://")
        self.budget = budget or GoogleBudget.from_settings(settings)
        self.clock = Clock()
        self._clients: Clients | None = None
        self.models = VertexModelClient(self)
        self.progress = ProgressReader(settings.vertex_progress_interval_seconds, wall=lambda: self.clock.wall())
        self.attempts = LaunchAttempts(self.clock, grace_seconds=settings.vertex_submit_grace_seconds,
                                       lookup_every_seconds=settings.vertex_poll_interval_seconds)
        self.cancels = Cancels(lambda: self.calls)
        self.poller = Poller(self.clock, poll_interval=settings.vertex_poll_interval_seconds,
                             attempts=self.attempts, cancels=self.cancels, progress=self.progress,
                             clients=lambda: self._clients)
        self.submitter = Submitter(settings, self.budget, self.attempts, calls=lambda: self.calls,
                                   console_url=lambda name: self.cfg.console_url(name), effective=self.effective,
                                   in_snapshot=self.poller.in_snapshot, launched=self.poller.launched)
        self.log_reader = LogReader(settings, self.budget, self.clock, lambda: self._clients)

    # The clock launch attempts are measured by (the lifecycle stamps them in UTC), and the
    # timers' clock: tests put the whole backend on a fake one by setting these two.
    @property
    def _now(self) -> Callable[[], datetime]:
        return self.clock.wall

    @_now.setter
    def _now(self, wall: Callable[[], datetime]) -> None:
        self.clock.wall = wall

    @property
    def _mono(self) -> Callable[[], float]:
        return self.clock.mono

    @_mono.setter
    def _mono(self, mono: Callable[[], float]) -> None:
        self.clock.mono = mono

    # lifecycle ----------------------------------------------------------------------------------
    def start_client(self) -> None:
        self._clients = connect(self.settings, self.budget)

    def stop_controller(self) -> None:
        self.cancels.clear()
        self.attempts.clear()
        self.progress.clear()
        self.poller.clear()

    def close(self) -> None:
        if self._clients is not None:
            self._clients.close()
            self._clients = None

    def upload_client(self) -> VertexModelClient:
        """The UploadsModels role: the Model Registry calls the controller's uploads make."""
        return self.models

    @property
    def started(self) -> Clients:
        if self._clients is None:
            raise RuntimeError("vertex backend not started")
        return self._clients

    @property
    def config(self) -> vconfig.VertexConfig | None:
        return self._clients.config if self._clients is not None else None

    @property
    def cfg(self) -> vconfig.VertexConfig:
        return self.started.config

    @property
    def client(self) -> v1.JobServiceClient:
        return self.started.jobs

    @property
    def model_client(self) -> v1.ModelServiceClient:
        return self.started.models

    @property
    def calls(self) -> JobsApi:
        return self.started.api

    # what the service asks ----------------------------------------------------------------------
    def check_launchable(self, compiled: CompiledJob) -> list[Problem]:
        out = compiled.base_output_directory
        if out and not out.startswith("gs://"):
            return [Problem("base_output_directory",
                            f"Vertex AI writes model, checkpoints and TensorBoard logs to Cloud Storage, not {out!r}",
                            "use a gs://bucket/prefix URI (or leave it out to use the service's default)")]
        config = self.config
        problems = resources.region_problems(compiled, config)
        if (compiled.vertex or {}).get("model_upload") and not out and not (config and
                                                                              config.base_output_directory):
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

    # what the controller does -------------------------------------------------------------------
    def submit(self, job: JobHandle) -> SubmitResult:
        return self.submitter.submit(job)

    def begin_pass(self) -> None:
        self.poller.begin_pass()

    def end_pass(self) -> None:
        self.poller.end_pass()

    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        return self.poller.poll(jobs)

    def observed(self, jobs: Sequence[JobHandle]) -> dict[uuid.UUID, tuple[JobState, datetime]]:
        return self.poller.observed(jobs)

    def preempt(self, job: JobHandle, grace_seconds: float) -> None:
        """SharesCapacity.preempt: Vertex AI has no graceful stop of our own, so a preemption is
        its cancel; Google sends the replicas SIGTERM and kills them after its own grace
        (`grace_seconds` cannot change it). The lifecycle records the preemption however it ends."""
        self.cancel(job)

    def cancel(self, job: JobHandle) -> JobState | None:
        names = [job.backend_ref] if job.backend_ref else []
        if not names:
            try:
                names = [cj.name for cj in self.calls.find_by_label(job)]
            except BudgetSpent as e:
                raise TransientBackendError(f"looking up the job to cancel: {e}", nothing_launched=True) from e
            except Exception as e:  # noqa: BLE001 - sorted by as_backend_error
                raise errors.as_backend_error(e, "looking up the job to cancel") from e
            self.attempts.looked_up(str(job.id))
            if not names:
                # Not CANCELLED yet: an earlier create attempt may still land. Poll settles it:
                # CANCELLED once none can, or a cancel sent to what landed.
                return None
        try:
            for name in names:
                self.cancels.send(job, name)
        except PermanentBackendError:
            self.progress.ended(str(job.id))   # refused for good: the job ends all the same
            raise
        # Stopped: no replica of it is judged any more (a stalled job ends FAILED and leaves
        # the poll; its last lines are still read a few times, then it is forgotten).
        self.progress.ended(str(job.id))
        return None

    def offered_capacity(self) -> dict[str, int]:
        """SharesCapacity: a project's quota is not ours to read; the operator sets it."""
        return {}

    def demand(self, compiled: CompiledJob) -> dict[str, int]:
        """SharesCapacity: vCPUs and accelerators by type, over every replica (the quota's terms)."""
        return pool_demand(compiled.custom_job_dict)

    # logs -----------------------------------------------------------------------------------------
    def read_logs(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        # Cloud Logging answers in its own time: a request reading it holds no request seat meanwhile.
        with waiting_elsewhere():
            return self.log_reader.read(job, replica=replica, since=since, limit=limit)

    def follow_interval(self, job: JobHandle, *, caught_up: bool, idle_seconds: float) -> float | None:
        return self.log_reader.follow_interval(caught_up=caught_up, idle_seconds=idle_seconds)
