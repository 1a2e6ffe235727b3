"""Following Vertex jobs: their states and facts (progress, silences) as Observations.

Following costs one listing per `vertex_poll_interval_seconds` at most, not one call per
job: a paged list of our unfinished CustomJobs created since the oldest active job. It is
background work of the Vertex call budget (budget.py): its pages leave the reserve to
creates and cancels, and when no token is left the listing goes on from the same page in
a later pass. So with many jobs or a short budget a listing spans several passes and each
job's state is refreshed less often, never skipped; `observed()` says when each state was
last confirmed (the job view's `state_observed_at`). Once a listing is complete, every job
of each batch is observed against it once. A job we created that it does not show (it
ended, or was deleted on Vertex) is fetched by name: one get, whatever the number of ended
CustomJobs in the project. A job that never got a CustomJob is looked up by label while its
create attempt may still land. Progress lines of running jobs are read from Cloud Logging
on their own interval (progress_reader.py). A spent budget costs a pass nothing; a 429 or
503 costs it one call and one warning line, and the next pass goes on."""
from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1

from service.backends.vertex import errors, mapping
from service.backends.vertex.attempts import LaunchAttempts
from service.backends.vertex.budget import BudgetSpent
from service.backends.vertex.cancels import Cancels
from service.backends.vertex.clients import Clients
from service.backends.vertex.clock import Clock
from service.backends.vertex.errors import retry_note
from service.backends.vertex.jobs_api import name_key
from service.backends.vertex.progress_reader import ProgressReader
from service.lifecycle.protocol import JobHandle, Observation, PermanentBackendError, TransientBackendError
from service.lifecycle.states import TERMINAL, JobState

log = logging.getLogger("trainjobs.vertex")

@dataclass
class _Listing:
    """One listing of our unfinished CustomJobs, fetched page by page as the budget allows."""

    since: datetime
    started_mono: float
    started_wall: datetime
    token: str = ""
    pages: int = 0
    done: bool = False
    jobs: dict[str, tuple[v1.CustomJob, datetime]] = field(default_factory=dict)  # job id -> (it, when its page came)
    observed: set[str] = field(default_factory=set)   # jobs observed against it (once complete)
    deferred: bool = False   # a pass left a missing job's get for later (budget, outage)
    settled: bool = False    # a whole pass observed it with nothing left for later


_GONE = object()   # a get answered 404: the CustomJob no longer exists
# Listings are paced to use at most this part of the Vertex call budget on average (what a
# listing costs grows with the jobs followed), so the rest stays free for creates, cancels,
# lookups of ended jobs and everyone else in the project, at any number of jobs.
POLL_SHARE = 0.5
LOOKUP_CHUNK = 20  # job ids per label lookup (`labels.k="a" OR labels.k="b" ...`): a short filter
LOOKUP_PAGE = 100  # one page holds them all (unless someone else's CustomJobs carry our labels)
LOOKUP_MAX_PAGES = 2   # then what is still missing is asked for by name: CustomJobs made by others
                       # with our labels (a replica's service account may create some) cost a bound


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
        self._advanced = False                      # this pass's first poll moved the listing on
        self._listing: _Listing | None = None       # being fetched, or complete and being observed
        self._confirmed: dict[str, tuple[JobState, datetime]] = {}   # for observed(): job id -> (state, when)
        self._launched: dict[str, float] = {}       # job id -> when this process created or adopted its CustomJob
        self.listings = 0                           # listings completed (benchmarks, tests)
        self._or_lookups = True                     # several jobs a label lookup (until Vertex refuses OR)

    @property
    def started(self) -> Clients:
        clients = self._clients()
        if clients is None:
            raise RuntimeError("vertex backend not started")
        return clients

    def clear(self) -> None:
        """This process stopped controlling: a later term starts with a listing of its own."""
        with self._lock:
            self._listing = None
            self._confirmed.clear()
            self._launched.clear()

    # passes -------------------------------------------------------------------------------------
    def begin_pass(self) -> None:
        """The controller starts a pass over all our active jobs (oldest first, in batches)."""
        with self._lock:
            self._pass += 1
            self._advanced = False

    def end_pass(self) -> None:
        """A complete listing that a whole pass observed, leaving nothing for later, is settled:
        the next may begin once the poll interval has passed since it began."""
        with self._lock:
            listing = self._listing
            if self._pass % 2 == 1 and self._advanced and listing is not None and listing.done:
                listing.settled = listing.settled or not listing.deferred
                listing.deferred = False
            self._pass += 1
            self._advanced = False

    def in_snapshot(self, job: JobHandle) -> v1.CustomJob | None:
        """The current listing already shows the job's CustomJob (costs nothing)."""
        listing = self._listing
        hit = listing.jobs.get(str(job.id)) if listing is not None else None
        return hit[0] if hit is not None else None

    def launched(self, job_id: str) -> None:
        """Submit created (or adopted) the job's CustomJob now: a listing begun before may
        not show it, and that is no sign that it ended."""
        with self._lock:
            self._launched[job_id] = self.clock.mono()

    def observed(self, jobs: Sequence[JobHandle]) -> dict[uuid.UUID, tuple[JobState, datetime]]:
        """When each of these jobs' states was confirmed since last asked: job id -> (the
        state as the controller holds it after this poll, when Vertex's answer came)."""
        with self._lock:
            out = {}
            for job in jobs:
                seen = self._confirmed.pop(str(job.id), None)
                if seen is not None:
                    out[job.id] = seen
            return out

    # poll ---------------------------------------------------------------------------------------
    def poll(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        if not jobs:
            return []
        out = self._observe(jobs)
        progress = self._read_progress(out)
        if progress:
            out = _with_progress(out, progress)
        return _with_silences(out, jobs, self.progress)

    def _observe(self, jobs: Sequence[JobHandle]) -> list[Observation]:
        listing = self._advance(min(j.created_at for j in jobs))
        console_url = self.started.config.console_url
        out: list[Observation] = []
        fetched: dict[str, Any] = {}
        if listing is not None and listing.done:
            missing = [j for j in jobs if j.backend_ref and str(j.id) not in listing.observed
                       and _ours(listing.jobs.get(str(j.id)), j) is None
                       # launched after the listing began: the next one shows it
                       and self._launched.get(str(j.id), float("-inf")) < listing.started_mono]
            fetched = self._fetch_missing(missing) if missing else {}
        for job in jobs:
            jid = str(job.id)
            seen = listing.jobs.get(jid) if listing is not None else None
            obs: Observation | None
            if not job.backend_ref:
                # Cancelled while its create attempt settles: no CustomJob of ours known yet.
                cj = seen[0] if seen is not None else self._late_create(job)
                obs = self._observed(job, cj, console_url(cj.name), self.clock.wall()) if cj is not None \
                    else self._settle_unlaunched(job)
            elif listing is None or not listing.done or jid in listing.observed:
                continue
            else:
                found = _ours(seen, job) or fetched.get(jid)
                if found is None:
                    if jid in fetched:
                        listing.deferred = True   # asked for, not answered: a later pass asks again
                    continue
                listing.observed.add(jid)
                obs = self._gone(job) if found is _GONE else self._observed(job, found[0], console_url(found[0].name),
                                                                             found[1])
            if obs is not None:
                out.extend(mapping.with_missed_start(job, obs))
        return out

    def _observed(self, job: JobHandle, cj: v1.CustomJob, console_url: str, at: datetime) -> Observation | None:
        obs = mapping.observe(job, cj, console_url, adopted_reason=f"adopted CustomJob {cj.name}, found by its label")
        self.cancels.resend_if_due(job, cj)
        self._follow_progress(job, cj)
        with self._lock:
            self._confirmed[str(job.id)] = (obs.state if obs is not None and obs.state is not None else job.state, at)
        return obs

    def _advance(self, since: datetime) -> _Listing | None:
        """The listing this pass observes against, its next pages fetched first (by the first
        poll of a pass; outside a pass every poll lists afresh). A new listing begins once the
        last one is settled and the poll interval has passed since it began."""
        with self._lock:
            inside = self._pass % 2 == 1
            first = not (inside and self._advanced)
            self._advanced = True
            listing = self._listing
        if not first:
            return listing
        now = self.clock.mono()
        if listing is None or not inside or (listing.settled and now - listing.started_mono >= self._interval(listing)):
            listing = self._listing = _Listing(since=since, started_mono=now, started_wall=self.clock.wall())
            with self._lock:   # what was launched before this listing began, it shows
                self._launched = {k: t for k, t in self._launched.items() if t >= now}
        if listing.done:
            return listing
        if since < listing.since:
            # An older job than the listing's bound (a controller change, a job adopted back):
            # start again from it rather than miss it.
            listing.since, listing.token, listing.jobs = since, "", {}
        self._fetch_pages(listing)
        return listing

    def _interval(self, last: _Listing) -> float:
        """Seconds from one listing's start to the next: the poll interval, or longer when the
        last listing's pages would otherwise take more than POLL_SHARE of the call budget."""
        per_minute = self.started.api.budget.vertex.per_minute
        return max(self.poll_interval, last.pages * 60.0 / (POLL_SHARE * per_minute))

    def _fetch_pages(self, listing: _Listing) -> None:
        """As many pages as the budget gives background calls now; the rest in later passes."""
        api = self.started.api
        filter_ = mapping.running_filter(listing.since)
        while not listing.done:
            try:
                page, token = api.page(filter_, listing.token, fields=mapping.POLL_FIELDS, background=True)
            except BudgetSpent:
                return   # the budget's reserve is for creates and cancels: go on next pass
            except Exception as e:  # noqa: BLE001 - sorted here; a bug of ours is raised as it is
                err = errors.as_backend_error(e, f"listing CustomJobs (page {listing.pages + 1})")
                if isinstance(err, TransientBackendError):
                    raise TransientBackendError(retry_note(err, api.budget.crud), nothing_launched=True) from e
                raise err from e
            at = self.clock.wall()
            listing.pages += 1
            for cj in page:
                keep(listing.jobs, cj, at)
            listing.token = token
            listing.done = not token
        self.listings += 1

    def _fetch_missing(self, jobs: list[JobHandle]) -> dict[str, Any]:
        """Jobs we created that the complete listing does not show (they ended, or were deleted):
        listed by their labels, LOOKUP_CHUNK a call, and only what the labels do not find asked
        for by name; so the cost is a few calls whatever the number of ended CustomJobs in the
        project. Job id -> (its CustomJob, when), _GONE (404), or None (deferred: budget, outage)."""
        api = self.started.api
        out: dict[str, Any] = {str(j.id): None for j in jobs}
        at = self.clock.wall()
        size = LOOKUP_CHUNK if self._or_lookups else 1
        try:
            for i in range(0, len(jobs), size):
                chunk = jobs[i:i + size]
                by_name: dict[str, tuple[v1.CustomJob, datetime]] = {}
                filter_ = " OR ".join(mapping.label_filter(str(j.id), legacy=mapping.is_legacy(j.compiled.custom_job_dict))
                                      for j in chunk)
                token = ""
                for _ in range(LOOKUP_MAX_PAGES):
                    page, token = api.page(filter_, token, page_size=LOOKUP_PAGE, fields=mapping.POLL_FIELDS,
                                           background=True)
                    at = self.clock.wall()
                    by_name.update((cj.name, (cj, at)) for cj in page)
                    if not token:
                        break
                for job in chunk:
                    out[str(job.id)] = by_name.get(job.backend_ref or "") or self._get(job)
        except BudgetSpent:
            pass   # the rest in a later pass
        except Exception as e:  # noqa: BLE001 - sorted here; a bug of ours is raised as it is
            err = errors.as_backend_error(e, f"looking up {len(jobs)} ended CustomJobs by their labels")
            if isinstance(err, PermanentBackendError) and size > 1:
                # Vertex documents OR in list filters; should a region refuse it, one job a call
                # (the filter of a single label, as submit's lookups) still costs a constant.
                self._or_lookups = False
                log.warning("%s; from now on one job a lookup", err)
            else:
                log.warning("%s", retry_note(err, api.budget.crud))
        return out

    def _get(self, job: JobHandle) -> tuple[v1.CustomJob, datetime] | object:
        """A CustomJob of ours that no label shows (deleted on Vertex, or its labels changed), by name."""
        try:
            return self.started.api.get(job.backend_ref or "", background=True), self.clock.wall()
        except gexc.NotFound:
            return _GONE

    def _gone(self, job: JobHandle) -> Observation:
        ended = JobState.CANCELLED if job.state == JobState.CANCELLING else JobState.FAILED
        message = f"CustomJob {job.backend_ref} no longer exists on Vertex AI (deleted outside trainjobs)"
        with self._lock:
            self._confirmed[str(job.id)] = (ended, self.clock.wall())
        return Observation(job_id=job.id, state=ended, reason=message,
                           error={"code": 5, "status": "NOT_FOUND", "message": message, "source": "vertex"})

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

    def _settle_unlaunched(self, job: JobHandle) -> Observation | None:
        """A job with no CustomJob found: CANCELLED once no create attempt of it can land."""
        if job.state == JobState.CANCELLING and not self.attempts.may_land(job):
            self.attempts.forget(str(job.id))
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


def _ours(seen: tuple[v1.CustomJob, datetime] | None, job: JobHandle) -> tuple[v1.CustomJob, datetime] | None:
    """A listed CustomJob carrying the job's label, if it is the one we created: a job that
    has its CustomJob follows that one, never another that someone made with its label."""
    if seen is None or (job.backend_ref and seen[0].name != job.backend_ref):
        return None
    return seen


def keep(found: dict[str, tuple[v1.CustomJob, datetime]], cj: v1.CustomJob, at: datetime) -> None:
    """A listed CustomJob of ours, by job id. Should two carry one job's label (never made by
    us), the lower name wins, the same one every listing."""
    jid = mapping.job_id_of(cj)
    if jid is None:
        return
    seen = found.get(jid)
    if seen is None or name_key(cj.name) < name_key(seen[0].name):
        if seen is not None:
            log.warning("job %s: two CustomJobs carry its label (%s, %s); following %s", jid, seen[0].name, cj.name,
                        cj.name)
        found[jid] = (cj, at)


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
