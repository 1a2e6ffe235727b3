"""Following Vertex jobs: their states and facts (progress, silences) as Observations.

Following costs a few list calls per `vertex_poll_interval_seconds`, not one call per
job: one paged list of our unfinished CustomJobs created since the batch's oldest job
(within a controller pass, the first batch's listing serves the later batches too),
and only for jobs not in it, one paged list of our ended ones (stopping once all are
found). A job no list shows is asked for by name, or, if it never got a CustomJob,
looked up by label while its create attempt may still land. Progress lines of running
jobs are read from Cloud Logging on their own interval (progress_reader.py). A spent
budget or an outage costs a pass nothing but a log line: the next pass tries again."""
from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1

from service.backends.vertex import mapping
from service.backends.vertex.attempts import LaunchAttempts
from service.backends.vertex.budget import BudgetSpent
from service.backends.vertex.cancels import Cancels
from service.backends.vertex.clients import Clients
from service.backends.vertex.clock import Clock
from service.backends.vertex.progress_reader import ProgressReader
from service.lifecycle.protocol import JobHandle, Observation, TransientBackendError
from service.lifecycle.states import TERMINAL, JobState

log = logging.getLogger("trainjobs.vertex")


@dataclass(frozen=True)
class _Snapshot:
    pass_id: int
    since: datetime
    jobs: dict[str, v1.CustomJob]   # job id -> its unfinished CustomJob


class Poller:
    def __init__(self, clock: Clock, *, poll_interval: float, attempts: LaunchAttempts, cancels: Cancels,
                 progress: ProgressReader, clients: Callable[[], Clients | None]):
        self.clock = clock
        self.poll_interval = poll_interval
        self.attempts = attempts
        self.cancels = cancels
        self.progress = progress
        self._clients = clients                     # None until the backend is started
        self._lock = threading.Lock()
        self._pass = 0                              # odd: inside a pass (begin_pass ... end_pass)
        self._snapshot: _Snapshot | None = None     # this pass's listing of our running CustomJobs
        self._list_due = True                       # this pass lists (vertex_poll_interval_seconds)
        self._listed_at: float | None = None        # monotonic time of the last listing attempt

    @property
    def started(self) -> Clients:
        clients = self._clients()
        if clients is None:
            raise RuntimeError("vertex backend not started")
        return clients

    # passes -------------------------------------------------------------------------------------
    def begin_pass(self) -> None:
        """The controller starts a pass over all our active jobs (oldest first, in batches)."""
        now = self.clock.mono()
        with self._lock:
            self._pass += 1
            self._snapshot = None
            self._list_due = self._listed_at is None or now - self._listed_at >= self.poll_interval

    def end_pass(self) -> None:
        """Outside a pass nothing is reused: every poll lists afresh."""
        with self._lock:
            self._pass += 1
            self._snapshot = None
            self._list_due = True

    def in_snapshot(self, job: JobHandle) -> v1.CustomJob | None:
        """This pass's listing already shows the job's CustomJob (costs nothing)."""
        with self._lock:
            snap = self._snapshot if self._pass % 2 == 1 else None
        if snap is None or snap.pass_id != self._pass:
            return None
        return snap.jobs.get(str(job.id))

    # poll ---------------------------------------------------------------------------------------
    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        if not jobs:
            return []
        out: list[Observation] = []
        if self._list_due:
            try:
                out = self._observe(jobs)
            except BudgetSpent as e:
                log.info("vertex: not following jobs this pass: %s", e)
        progress = self._read_progress(out)
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
        console_url = self.started.config.console_url
        out: list[Observation] = []
        for job in jobs:
            cj = found.get(str(job.id))
            if cj is None and not job.backend_ref:
                cj = self._late_create(job)
            obs: Observation | None
            if cj is not None:
                obs = mapping.observe(job, cj, console_url(cj.name),
                                      adopted_reason=f"adopted CustomJob {cj.name}, found by its label")
                self.cancels.resend_if_due(job, cj)
                self._follow_progress(job, cj)
            elif job.backend_ref and not ended_known:
                continue
            else:
                obs = self._settle_missing(job)
            if obs is not None:
                out.extend(mapping.with_missed_start(job, obs))
        return out

    def _running_since(self, since: datetime) -> dict[str, v1.CustomJob]:
        """Our unfinished CustomJobs created since `since`, by job id. Within one reconcile
        pass the first batch's listing (the oldest bound) serves the later batches too; a
        job created after it was taken is simply missing, and found by the fallbacks."""
        with self._lock:
            snap, current = self._snapshot, self._pass
        if snap is not None and current % 2 == 1 and snap.pass_id == current and snap.since <= since:
            return snap.jobs
        jobs: dict[str, v1.CustomJob] = {}
        self._listed_at = self.clock.mono()
        self.started.api.scan(mapping.running_filter(since), None, jobs)
        if current % 2 == 1:
            with self._lock:
                if self._pass == current:
                    self._snapshot = _Snapshot(current, since, jobs)
        return jobs

    def _find_ended(self, jobs: list[JobHandle], found: dict[str, v1.CustomJob]) -> None:
        """Jobs we created that the running list did not show: our ended CustomJobs, stopping
        as soon as all are found; those created before the label key lost its hyphen, by the
        old key."""
        api = self.started.api
        wanted = {str(j.id): j for j in jobs}
        api.scan(mapping.ended_filter(min(j.created_at for j in jobs)), wanted, found, stop_when_all=True)
        legacy = {jid: j for jid, j in wanted.items()
                  if jid not in found and mapping.is_legacy(j.compiled.custom_job_dict)}
        if legacy:
            api.scan(mapping.legacy_filter(min(j.created_at for j in legacy.values())), legacy, found,
                     stop_when_all=True)

    def _late_create(self, job: JobHandle) -> v1.CustomJob | None:
        """A job with no CustomJob of ours yet (cancelled while its create attempt settles):
        looked up by label while that attempt may still land, at most once a poll interval."""
        jid = str(job.id)
        if not self.attempts.may_land(job) or not self.attempts.lookup_due(jid):
            return None
        try:
            found = self.started.api.find_by_label(job)
        except Exception as e:  # noqa: BLE001 - budget, outage: the next pass looks again
            log.info("job %s: label lookup deferred: %s", jid, e)
            return None
        self.attempts.looked_up(jid)
        return found[0] if found else None

    def _settle_missing(self, job: JobHandle) -> Observation | None:
        """A job of the batch that no list showed."""
        jid = str(job.id)
        if job.backend_ref:
            # We created it, yet no list shows it: ask for it by name (rare; e.g. deleted on Vertex).
            started = self.started
            try:
                cj = started.api.get(job.backend_ref)
            except gexc.NotFound:
                ended = JobState.CANCELLED if job.state == JobState.CANCELLING else JobState.FAILED
                message = f"CustomJob {job.backend_ref} no longer exists on Vertex AI (deleted outside trainjobs)"
                return Observation(job_id=job.id, state=ended, reason=message,
                                   error={"code": 5, "status": "NOT_FOUND", "message": message, "source": "vertex"})
            except Exception as e:  # noqa: BLE001
                log.warning("job %s: get %s failed: %s", jid, job.backend_ref, e)
                return None
            return mapping.observe(job, cj, started.config.console_url(cj.name))
        if job.state == JobState.CANCELLING and not self.attempts.may_land(job):
            self.attempts.forget(jid)
            return Observation(job_id=job.id, state=JobState.CANCELLED,
                               reason="cancelled before it reached Vertex AI")
        return None  # an attempt may still land: a later pass looks again

    # progress -----------------------------------------------------------------------------------
    def _follow_progress(self, job: JobHandle, cj: v1.CustomJob) -> None:
        state = mapping.our_state(cj)
        if state == JobState.RUNNING or (state in TERMINAL and cj.start_time):
            # A job with a stall timeout has its chief and workers judged (lifecycle/stalls.py),
            # a replica never heard of counted from Vertex's startTime.
            jid, numeric = str(job.id), cj.name.rsplit("/", 1)[-1]
            if state == JobState.RUNNING and not self.progress.running_known(jid):
                # Once per job (the compiled job is parsed only here).
                self.progress.follow(jid, numeric, job.created_at, watch=_judged_tasks(job),
                                     running_since=cj.start_time or self.clock.wall())
            else:
                self.progress.follow(jid, numeric, job.created_at)
        if state in TERMINAL:
            self.progress.ended(str(job.id))

    def _read_progress(self, out: list[Observation]) -> dict[str, dict]:
        # A job that just ended is read at once (its last epochs), whatever the interval.
        ended_now = any(o.state in TERMINAL for o in out)
        clients = self._clients()
        if clients is None or not (self.progress.due() or ended_now):
            return {}
        return self.progress.read(clients.logging, clients.logging_session, clients.config.project)


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
    silences: dict[uuid.UUID, dict] = {}
    for job in jobs:
        if job.state == JobState.RUNNING:
            silent = reader.silence(str(job.id))
            if silent is not None:
                silences[job.id] = silent
    if not silences:
        return out
    merged = [dataclasses.replace(o, silence=silences.pop(o.job_id)) if o.job_id in silences else o for o in out]
    return merged + [Observation(job_id=jid, silence=s) for jid, s in silences.items()]
