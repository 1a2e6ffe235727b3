"""The one way a job is submitted: the API's POST /v1/jobs and relaunch, the UI's launch
form and the sweep launcher's trials all call `JobSubmitter`, built once per app.

A submit compiles the template version with the request's values, checks the result
(the backend can launch it, the retry policy is within bounds, the caller may make its
overrides, the team's budgets have room), stores it QUEUED through the job-row writer
(persistence.jobrows) in one transaction, commits (on PostgreSQL, for a team without
limits or webhooks: one statement that commits itself, persistence.autocommit), and wakes
the controller for admission (lifecycle.wake). It never calls a backend's submit: launching is the
controller's, so no request races it and none waits on Google.

The Idempotency-Key is handled here only: the same key and body return the job stored
first (`Submitted.replayed`), the same key with another body is a 409."""
from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import SimpleNamespace

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service import jobspec
from service.auth.service import Actor
from service.budgets import service as budgets
from service.capacity.placement import Placed, Placement
from service.core.errors import Conflict, DomainError, Invalid
from service.cost.estimate import CostEstimate, Pricer
from service.jobs import backend_choice, overrides_policy, placement_wish, precheck, relaunch
from service.jobs import service as jobs
from service.jobs.compile_reuse import Built, CompileReuse
from service.jobs.schemas import JobCreate, JobPreview, JobRelaunch, TemplateRef
from service.jobs.settings import JobSettings
from service.jobspec.reserved import JOB_ID_LABEL
from service.lifecycle import retries
from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Backend
from service.lifecycle.states import JobState
from service.lifecycle.wake import Wake, Waker
from service.persistence import jobrows
from service.persistence.autocommit import Autocommit, autocommit
from service.persistence.jobrows import ALWAYS, Guard
from service.persistence.models import Job, utcnow
from service.templates.cache import Head, TemplateCache

# The Idempotency-Key a client may send (the API's header, the UI form's hidden key):
# printable ASCII without spaces, 255 characters at most. Keys outside it (with spaces)
# are the service's own, e.g. sweep trials' (sweeps.service.job_key).
IDEMPOTENCY_KEY_MAX_LENGTH = 255
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]+$"       # as the header declares it (OpenAPI)
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def is_idempotency_key(key: str) -> bool:
    return IDEMPOTENCY_KEY.fullmatch(key) is not None


@dataclass(frozen=True)
class Submitted:
    """A stored job: the new one, or (`replayed`) the one an earlier identical request with
    the same Idempotency-Key stored. `job` is a Job for a replayed one; for a new one, its
    row's values (the attributes a Job has, and `cost`: the estimate just made), read
    without a SELECT. `compiled`: the new job's CompiledJob (None when replayed: read the row)."""

    job: Job | SimpleNamespace
    replayed: bool
    compiled: jobspec.CompiledJob | None

    @property
    def created(self) -> bool:
        return not self.replayed


class _NewJob(SimpleNamespace):
    """A new job's row values, read as a Job's attributes; its `compiled` column (the dict the
    row's JSON holds) is made only if something reads it: the answer reads the CompiledJob."""

    compiled_job: jobspec.CompiledJob

    @property
    def compiled(self) -> dict:
        return self.compiled_job.to_json()


@dataclass(frozen=True)
class Previewed:
    """A dry run: what would be launched; nothing stored, nobody woken."""

    preview: JobPreview
    compiled: jobspec.CompiledJob


SubmitResult = Submitted | Previewed


@dataclass(frozen=True)
class _Compiled:
    """A submit's checked, compiled job, before it is stored or previewed."""

    tv: precheck.Launchable
    ref: TemplateRef
    submitted: str               # the first event's reason (the overrides policy's words)
    backend_name: str
    backend: Backend
    job_id: uuid.UUID
    display_name: str
    compiled: jobspec.CompiledJob
    placed: Placed
    built: Built                 # prices the job (once per reused compile)
    accepts: list | None = None  # the backends it accepts, when more than one (backend_choice.Accepted)
    wish: dict | None = None     # its placement wish among them (placement_wish.resolve)


@dataclass(frozen=True)
class _Missed:
    """A guess that was not stored (`_guessed`): the Launchable it compiled from, and its compile
    or the problem its compile raised, which the submit in order reuses when its pre-check reads
    the same version: a missed guess reads the version and compiles once, as an ordered submit."""

    tv: precheck.Launchable
    compiled: _Compiled | None = None
    error: DomainError | None = None

def request_hash(body: JobCreate, dry_run: bool) -> str:
    canonical = json.dumps({"body": body.model_dump(mode="json"), "dry_run": dry_run},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class JobSubmitter:
    """Built once per app (service.app) from what every submit needs; `waker` wakes the
    controller after commit (None: nobody is woken, e.g. a tool that only previews)."""

    def __init__(self, backends: Mapping[str, Backend], engine: Engine, *, template_cache: TemplateCache,
                 pricer: Pricer, default_backend: str, waker: Waker | None = None,
                 placement: Placement | None = None, compile_reuse: CompileReuse | None = None,
                 settings: JobSettings | None = None) -> None:
        self.backends = backends
        self.engine = engine
        self.template_cache = template_cache
        self.pricer = pricer
        self.default_backend = default_backend
        self.waker = waker if waker is not None else Waker()
        # Shared capacity: the job's priority class, demand, and whether it could ever fit.
        self.placement = placement
        # The last compiles and prices, reused by submits of the same version and values.
        self.compile_reuse = compile_reuse if compile_reuse is not None else CompileReuse(0)
        # Prices per resource-hour and the furthest start_by, for a job's placement wish.
        self.prices = settings.placement_prices if settings is not None else {}
        self.max_start_by_seconds = settings.placement_max_start_by_seconds if settings is not None else 30 * 86_400

    def submit(self, session: Session, body: JobCreate, actor: Actor, *, dry_run: bool = False,
               idempotency_key: str | None = None, verify_token: str = "", relaunch_of: uuid.UUID | None = None,
               trial: jobspec.Trial | None = None) -> SubmitResult:
        """Submit `body` as `actor` (whose role decides which overrides are allowed) in
        `session`, which this commits: anything the caller added to it first (a sweep's
        trial row) commits with the job. After the commit the controller is woken for
        admission (lifecycle.wake: in-process if this process controls, else a NOTIFY sent
        in the same statement as the job row). Returns Previewed for a dry run (nothing
        stored), else Submitted.

        `idempotency_key`: as the Idempotency-Key header (`is_idempotency_key` for a
        client's); the same key and body return the first job (replayed), another body is
        a Conflict naming it (extra `job_id`). `verify_token`: the hash of a token taken
        from the auth cache (auth.cache), checked against revocation before anything is
        read or written for it. `relaunch_of`: the job this one launches again (on the row
        and in its first event). `trial`: the sweep trial this job runs (its env, labels).

        Raises the domain's errors (Invalid 422, Forbidden 403, NotFound 404, Conflict 409,
        Unauthorized 401, budgets.LimitExceeded) with the session rolled back or untouched."""
        # Until the work needs a transaction, each statement commits itself: a team without
        # limits or webhooks has one read and one write (persistence.autocommit), and once this
        # process has read the template's head, one guarded write alone (`_guessed`).
        with autocommit(session) as alone:
            return self._submit(session, body, actor, alone, dry_run, idempotency_key, verify_token, relaunch_of,
                                trial)

    def _submit(self, session: Session, body: JobCreate, actor: Actor, alone: Autocommit, dry_run: bool,
                idempotency_key: str | None, verify_token: str, relaunch_of: uuid.UUID | None,
                trial: jobspec.Trial | None) -> SubmitResult:
        digest = request_hash(body, dry_run) if idempotency_key else None
        if idempotency_key and digest and not dry_run:
            if verify_token:
                precheck.check_token_live(session, verify_token)
                verify_token = ""
            existing = self._replay(session, actor, idempotency_key, digest)
            if existing is not None:
                return Submitted(existing, True, None)
        missed = None
        if alone.on and not dry_run and not idempotency_key:
            head = self.template_cache.head(actor.team_id, body.template)
            if head is not None:
                guess = self._guessed(session, body, actor, alone, head, verify_token, trial)
                if isinstance(guess, Submitted):
                    return guess
                missed = guess
        c = self._compile(session, body, actor, verify_token, trial, missed)
        cost = self._price(c)
        if dry_run:
            view = c.backend.launch_view(c.job_id, c.compiled, None)
            return Previewed(JobPreview(display_name=c.display_name, template=c.ref, backend=c.backend_name,
                                        labels=view.custom_job.get("labels", {}), custom_job=view.custom_job,
                                        cluster=jobs.cluster_view(c.compiled, view), cost=cost,
                                        resources=view.resources), c.compiled)
        # Under the team's limits lock, in this transaction: the check and the insert commit together.
        # A team without limits (the pre-check said so) takes no lock: limits set by an
        # admin meanwhile hold from the next submit, as if set just after this one.
        if c.tv.team_limited or c.tv.team_webhooks:
            alone.end()   # the lock, or the outbox's rows, and the job commit together
        if c.tv.team_limited:
            budgets.check_submit(session, actor.team_id, actor.team, cost)
        stored = self._store(session, body, actor, c, cost, idempotency_key, digest, relaunch_of, alone)
        assert stored is not None   # no guard: written or raised
        return stored

    def _guessed(self, session: Session, body: JobCreate, actor: Actor, alone: Autocommit, head: Head,
                 verify_token: str, trial: jobspec.Trial | None) -> Submitted | _Missed | None:
        """The submit in one statement: compiled from the template's head as this process last
        read it (templates.cache.Head), and stored only if the statement finds everything the pre-check
        would have read unchanged (precheck.guard). Else nothing was written, and the submit
        runs in order (the pre-check first), so every answer but a stored job (a revoked token,
        an archived or changed template, a problem in the body) is the ordered path's own, word
        for word. _Missed: what the guess compiled, for the ordered path to reuse (`_compile`);
        None: nothing was guessed (the version is not in the cache)."""
        tv = precheck.guessed(self.template_cache, head, body.template_version)
        if tv is None:
            return None
        try:
            c = self._build(session, body, actor, tv, trial)
        except DomainError as e:
            return _Missed(tv, error=e)
        stored = self._store(session, body, actor, c, self._price(c), None, None, None, alone,
                             guard=precheck.guard(head, actor.team_id, verify_token))
        return stored if stored is not None else _Missed(tv, compiled=c)

    def _price(self, c: _Compiled) -> CostEstimate:
        """The job's estimate: kept with its reused compile, else priced now."""
        return c.built.cost(c.backend_name, lambda: self.pricer.estimate(c.compiled.custom_job_dict, c.backend_name,
                                                                          c.backend.capabilities.runs_on))

    def _compile(self, session: Session, body: JobCreate, actor: Actor, verify_token: str,
                 trial: jobspec.Trial | None, missed: _Missed | None = None) -> _Compiled:
        """The pre-check, then the compile (`_build`), or a missed guess's of the same version."""
        tv = precheck.for_submit(session, self.template_cache, actor.team_id, body.template, body.template_version,
                                 token_hash=verify_token, known=missed.tv if missed else None)
        if tv.archived:
            raise Conflict(f"template {body.template!r} is archived; "
                           f"POST /v1/templates/{body.template}/unarchive to use it again")
        if missed is not None and (missed.tv.template_id, missed.tv.version) == (tv.template_id, tv.version):
            # The guess compiled this very version with these values: its job, or its problem, is this one's.
            if missed.error is not None:
                raise missed.error
            assert missed.compiled is not None    # one of the two
            return replace(missed.compiled, tv=tv)
        return self._build(session, body, actor, tv, trial)

    def _build(self, session: Session, body: JobCreate, actor: Actor, tv: precheck.Launchable,
               trial: jobspec.Trial | None) -> _Compiled:
        """The compile and every check of the result: every problem at once (issue 25), the
        overrides policy's and the backend's with the compiler's."""
        submitted, problems = overrides_policy.enforce(actor, tv.name, tv.version, tv.prepared.spec, body.overrides)
        names, chosen = backend_choice.requested(tv.prepared.spec, body.overrides, body.backend, self.default_backend,
                                                 self.backends, admin=actor.can("admin"))
        problems += chosen
        backend_name = names[0] if len(names) == 1 else ", ".join(names)
        job_id = uuid.uuid4()
        display_name = body.display_name if body.display_name is not None else f"{body.template}-{job_id.hex[:8]}"
        try:
            built = self.compile_reuse.build((tv.template_id, tv.version), tv.prepared, body.parameters,
                                             body.overrides, display_name=display_name, labels=body.labels,
                                             reserved_labels={JOB_ID_LABEL: str(job_id)}, trial=trial)
        except Invalid as e:
            # What needs the compiled job waits; the detail says so (the list keeps the
            # input's own problems only: clients count them, e.g. TRAINJOBS_MAX_PROBLEMS).
            first = Invalid.of(problems + e.problems)
            raise Invalid(f"{first.detail}; the {backend_name} backend's checks and the retry limits run "
                          "once these are fixed", problems=first.problems) from None
        compiled = built.compiled
        placement = self.placement
        accepted, found = backend_choice.check(
            names, self.backends, compiled, actor.team,
            lambda name, b: placement.place(session, name, b, compiled, actor.team) if placement is not None else Placed())
        problems += found + retries.limit_problems(compiled.retry, self.engine.retry_limits)
        wish = None
        if accepted is not None:
            wish, found = placement_wish.resolve(compiled, accepted.placed, self.backends,
                                                 self.prices, self.pricer, utcnow(), self.max_start_by_seconds)
            problems += found
        if problems or accepted is None:
            raise Invalid.of(problems)
        backend_name, placed = accepted.first
        return _Compiled(tv, TemplateRef(name=tv.name, version=tv.version), submitted, backend_name,
                         self.backends[backend_name], job_id, display_name, compiled, placed, built, accepted.accepts(),
                         wish)

    def _store(self, session: Session, body: JobCreate, actor: Actor, c: _Compiled, cost: CostEstimate,
               idempotency_key: str | None, digest: str | None, relaunch_of: uuid.UUID | None,
               alone: Autocommit, guard: Guard = ALWAYS) -> Submitted | None:
        """The job row, its labels, first event and cost row in one transaction, committed
        (or, `alone.on`, in one statement that commits itself); then the controller is woken.
        `guard`: see `_guessed`; None when it did not hold (nothing written)."""
        now = utcnow()
        values = dict(id=c.job_id, team_id=actor.team_id, display_name=c.display_name, template_id=c.tv.template_id,
                      template_name=c.ref.name, template_version=c.ref.version, backend=c.backend_name,
                      state=JobState.QUEUED.value, parameters=dict(body.parameters), overrides=body.overrides,
                      labels=dict(body.labels), created_by=actor.name,
                      created_at=now, updated_at=now, idempotency_key=idempotency_key, request_hash=digest,
                      backend_ref=None, console_url=None, error=None, progress=None, started_at=None,
                      ended_at=None, launch_attempted_at=None, waiting_reason=None, attempt=1, retry_of=None,
                      not_before=None, relaunch_of=relaunch_of, accepts=c.accepts, placement=None, wish=c.wish,
                      **c.placed.columns())
        # The compiled job from the JSON the compiler already wrote (`values` leaves it out).
        row = jobrows.job_row(values, encoded={"compiled": c.compiled.to_json_text()})
        reason = c.submitted + (f"; relaunch of job {relaunch_of}" if relaunch_of is not None else "")
        event = self.engine.creation_event(c.job_id, actor.name, now, reason=reason)
        # A job that accepts several backends waits in each one's queue: every loop is woken.
        wake = Wake.admission(c.backend_name) if c.accepts is None else Wake(None, admit_only=True)
        try:
            if not jobrows.insert_job(session, row, body.labels, event, budgets.cost_row(c.job_id, actor.team_id, cost),
                                      pg_also=self.waker.also(wake), guard=guard):
                return None
            # What a listener might write from here is in a transaction (the ones there are
            # write nothing for a new job of a team without webhooks: tests/jobs/test_autocommit_submit.py).
            alone.end()
            self.engine.announce_created(session, event, {"team_webhooks": c.tv.team_webhooks})
            # Committed before the controller can see it: a rolled-back request never launches anything.
            session.commit()
        except IntegrityError:
            # Another request with the same Idempotency-Key committed first.
            session.rollback()
            if idempotency_key and digest:
                existing = self._replay(session, actor, idempotency_key, digest)
                if existing is not None:
                    return Submitted(existing, True, None)
            raise
        self.waker.after(wake)
        # The stored row, without a SELECT or an ORM object (its instrumentation costs more than
        # the view needs): the response reads these attributes, as it would a Job's.
        # `cost`: the estimate just made, so the answer does not price the job twice.
        return Submitted(_NewJob(**values, cost=cost, compiled_job=c.compiled), False, c.compiled)

    def relaunch(self, session: Session, job_id: uuid.UUID, change: JobRelaunch, actor: Actor, *,
                 idempotency_key: str | None = None, verify_token: str = "") -> Submitted:
        """A new job from what job `job_id` was launched with, changed by `change`
        (jobs.relaunch.relaunch_body), submitted like any other (`submit`'s contract).
        `verify_token` is checked before the earlier job is even looked up."""
        if verify_token:
            precheck.check_token_live(session, verify_token)
        earlier = jobs.get_job(session, actor.team_id, job_id)
        result = self.submit(session, relaunch.relaunch_body(earlier, change), actor,
                             idempotency_key=idempotency_key, relaunch_of=job_id)
        assert isinstance(result, Submitted)   # not a dry run
        return result

    @staticmethod
    def _replay(session: Session, actor: Actor, key: str, digest: str) -> Job | None:
        job = session.scalar(select(Job).where(Job.team_id == actor.team_id, Job.idempotency_key == key))
        if job is None:
            return None
        if job.request_hash != digest:
            raise Conflict(f"Idempotency-Key {key!r} was used for a different request (job {job.id}); "
                           "use a new key for a new job", job_id=str(job.id))
        return job
