"""The only writer of job states.

Every path goes through here: the controller's submit results and observations,
a member's cancel, a job's creation. A state changes only from the state that
was read (`UPDATE jobs ... WHERE id = :id AND state = :seen`), so two writers
can never both move a job, and each accepted change is exactly one JobEvent.
The controller's writes also carry its fencing epoch: once another process has
taken over, a deposed controller's late writes change nothing (Deposed).

Policy lives in `decide()`: backends report facts (what Vertex says, how the
replicas ended); what that means for the job is decided here, once."""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import exists, insert, or_, select, update
from sqlalchemy.orm import Session

from service.core.clock import utcnow
from service.core.errors import Conflict, NotFound
from service.lifecycle import continuation, preempted, retries, sanitize
from service.lifecycle.admission import PreemptOrder
from service.lifecycle.protocol import Observation
from service.lifecycle.states import TERMINAL, JobState, can_transition
from service.persistence.models import ControllerLease, Job, JobBackend, JobEvent
from service.persistence.rows import rows_changed

log = logging.getLogger("trainjobs.lifecycle")
S = JobState
CAS_ATTEMPTS = 5
LEASE = "controller"
# The keys a too-large progress keeps (the charts and the list need these).
PROGRESS_KEEP = ("epoch", "epochs", "steps", "phase", "updated_at", "task", "metrics")


BATCH = "lifecycle.batch"   # session.info key: the scratch of a batch of changes (Engine.batch)


def batch_scratch(session: Session) -> dict | None:
    """The scratch dict of the batch of changes `session` is writing (Engine.batch), or None."""
    return session.info.get(BATCH)


class Deposed(Exception):
    """This process's controller epoch is no longer the current one: stop at once."""


class Listener(Protocol):
    """Called inside the writing transaction (e.g. a webhook outbox row, epoch history):
    what a listener writes commits or rolls back with the change itself."""

    def __call__(self, session: Session, change: Change) -> None: ...


@dataclass(frozen=True)
class Change:
    job_id: uuid.UUID
    from_state: JobState | None
    to_state: JobState | None        # None: no state change (e.g. progress only)
    reason: str
    actor: str
    at: datetime
    progress: dict | None = None     # the stored progress, when it changed
    # Facts the writer already read in its own round trips that spare a listener a query
    # (the submit path: {"team_webhooks": False}). Absent: the listener finds out itself.
    context: dict | None = None


# The columns an observation's decision reads (Engine.planned), by `apply` and lifecycle/bulk.py alike.
APPLY_COLUMNS = (Job.id, Job.state, Job.backend_ref, Job.console_url, Job.started_at, Job.waiting_reason,
                 Job.preempt_requested_at, Job.preempted_for, Job.preempt_reason, Job.preempt_kind, Job.team_id)


@dataclass
class Planned:
    """What one observation writes (Engine.planned): `values` to the job's row if its state is
    still `seen`, then its event (Engine.recorded)."""
    obs: Observation
    seen: str
    values: dict
    dst: JobState | None
    reason: str
    ending: preempted.Ending | None
    note: str | None
    team_id: uuid.UUID | None
    at: datetime


def decide(current: JobState, proposed: JobState | None) -> JobState | None:
    """The state a job moves to when a backend reports `proposed`; None: it stays."""
    if proposed is None or proposed == current or current in TERMINAL:
        return None
    if current == S.CANCELLING and proposed not in TERMINAL:
        return None  # the cancel has not reached it yet: it is still being cancelled
    if not can_transition(current, proposed):
        log.warning("a backend reported %s for a job in %s; not an allowed move, ignored",
                    proposed.value, current.value)
        return None
    return proposed


def _preempted(row, current: JobState, dst: JobState | None, reason: str, error: dict | None,
               for_own_team: bool = True):
    """(the preemption's ending or None, the state, the event's reason, the error) for what a
    backend reported of a job (lifecycle/preempted.py decides whether it ends a preemption)."""
    ending = preempted.ended(row, current, dst, error, for_own_team)
    if ending is not None:
        return ending, S.FAILED, ending.reason, ending.error
    if row.preempt_requested_at is not None and dst == S.CANCELLING:
        return None, None, reason, error   # the backend's own cancel of a preemption
    return None, dst, reason, error


def _changes(obs: Observation, row, current: JobState, dst: JobState | None, err: dict | None,
             progress: dict | None, now: datetime) -> dict:
    """The columns an observation changes, given what was read and decided (Engine.apply)."""
    values: dict = {}
    if obs.backend_ref and obs.backend_ref != row.backend_ref:
        values["backend_ref"] = sanitize.clean_text(obs.backend_ref, 512)
    if obs.console_url and obs.console_url != row.console_url:
        values["console_url"] = sanitize.clean_text(obs.console_url, 1024)
    if progress is not None:
        values["progress"] = progress
    if err is not None and (dst is not None or current not in TERMINAL):
        values["error"] = err
    if dst is not None:
        values["state"] = dst.value
        if (dst == S.RUNNING or obs.started_at) and row.started_at is None:
            values["started_at"] = obs.started_at or now
        if dst in TERMINAL:
            values["ended_at"] = obs.ended_at or now
    elif obs.started_at and row.started_at is None and current not in (S.QUEUED,):
        values["started_at"] = obs.started_at
    return values


class Engine:
    def __init__(self, *, progress_max_bytes: int = 16_384, error_max_bytes: int = 65_536,
                 retry_limits: retries.RetryLimits = retries.RetryLimits()) -> None:
        self.progress_max_bytes = progress_max_bytes
        self.error_max_bytes = error_max_bytes
        self.retry_limits = retry_limits
        self.listeners: list[Listener] = []
        # Each backend's place for job outputs (its capabilities, set where the backends are built):
        # where a preempted job's next attempt may go on (lifecycle/continuation.py).
        self.output_places: dict[str, continuation.OutputPlace] = {}

    def listen(self, listener: Listener) -> None:
        self.listeners.append(listener)

    @staticmethod
    @contextmanager
    def batch(session: Session) -> Iterator[None]:
        """Changes written together, in one transaction the caller commits (a controller pass's
        observations, its launches): listeners may keep what they read for the batch in
        `batch_scratch(session)` (the outbox: which teams have a webhook) instead of reading it
        per change."""
        session.info[BATCH] = {}
        try:
            yield
        finally:
            session.info.pop(BATCH, None)

    # -- the primitive -------------------------------------------------------------------
    def _write(self, session: Session, job_id: uuid.UUID, seen: str, values: dict, *,
               fence: int | None) -> bool:
        stmt = update(Job).where(Job.id == job_id, Job.state == seen)
        if fence is not None:
            stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == fence))
        if rows_changed(session.execute(stmt.values(**values))) == 1:
            return True
        if fence is not None and not self.fence_holds(session, fence):
            raise Deposed(f"controller epoch {fence} is no longer current")
        return False

    def fence_holds(self, session: Session, fence: int) -> bool:
        return session.scalar(select(ControllerLease.epoch).where(ControllerLease.name == LEASE)) == fence

    @staticmethod
    def _event_row(job_id: uuid.UUID, src: str | None, dst: JobState, reason: str, actor: str,
                   at: datetime) -> dict:
        return {"job_id": job_id, "from_state": src, "to_state": dst.value,
                "reason": sanitize.clean_text(reason, 2000), "actor": sanitize.clean_text(actor, 200), "at": at}

    def _event(self, session: Session, job_id: uuid.UUID, src: str | None, dst: JobState, reason: str,
               actor: str, at: datetime, progress: dict | None = None, preempted: bool = False,
               team_id: uuid.UUID | None = None) -> None:
        # A failure and its retry (the next attempt's row) are one transaction: both or neither.
        # A preemption is not the job's failure: its new attempt is made whatever the policy says.
        if preempted:
            plan = retries.plan_preemption(session, job_id, at, self.output_places)
        else:
            plan = retries.plan(session, job_id, S(src) if src else None, at, self.retry_limits) \
                if dst == S.FAILED else retries.Plan()
        reason += plan.note
        session.execute(insert(JobEvent), [self._event_row(job_id, src, dst, reason, actor, at)])
        context = {k: v for k, v in (("preempted", preempted), ("team_id", team_id)) if v}
        self._notify(session, Change(job_id, S(src) if src else None, dst, reason, actor, at, progress,
                                     context=context or None))
        if plan.row is not None:
            first = self.creation_event(plan.row["id"], "lifecycle", at, reason=plan.first_reason)
            retries.insert_attempt(session, plan, job_id, first)   # the job-row writer, as a submit
            self.announce_created(session, first)

    def _notify(self, session: Session, change: Change) -> None:
        for listener in self.listeners:
            listener(session, change)

    # -- the paths -----------------------------------------------------------------------
    def created(self, session: Session, job_id: uuid.UUID, actor: str, at: datetime,
                reason: str = "submitted") -> None:
        """The first event of a job whose row (state QUEUED) the caller inserted."""
        self._event(session, job_id, None, S.QUEUED, reason, actor, at)

    def creation_event(self, job_id: uuid.UUID, actor: str, at: datetime, reason: str = "submitted") -> dict:
        """The row of a job's first event (QUEUED), for a caller that writes it in the same
        statement as the job row (one round trip); it then calls `announce_created`."""
        return self._event_row(job_id, None, S.QUEUED, reason, actor, at)

    def announce_created(self, session: Session, event: dict, context: dict | None = None) -> None:
        """The listeners' part of `created`, once the caller has written `creation_event`'s row."""
        self._notify(session, Change(event["job_id"], None, S.QUEUED, event["reason"], event["actor"], event["at"],
                                     context=context))

    def move(self, session: Session, job_id: uuid.UUID, dst: JobState, *, reason: str, actor: str,
             allowed_from: Callable[[JobState], bool] | None = None, fence: int | None = None,
             values: dict | None = None) -> JobState:
        """Move a job to `dst` from whatever state it is in, if the table allows it.
        Returns the state it was in. Raises NotFound, or Conflict for a move not allowed."""
        for _ in range(CAS_ATTEMPTS):
            seen = session.scalar(select(Job.state).where(Job.id == job_id))
            if seen is None:
                raise NotFound(f"no job with id {job_id}")
            src = S(seen)
            if src == dst:
                return src
            if not can_transition(src, dst) or (allowed_from and not allowed_from(src)):
                raise Conflict(f"job {job_id} cannot go from {src.value} to {dst.value}",
                               current_state=src.value)
            now = utcnow()
            row = {"state": dst.value, "updated_at": now, **(values or {})}
            if src == S.QUEUED:   # it waits no more, nor does capacity freed by preemption wait for it
                row.setdefault("waiting_reason", None)
                row.setdefault("nominated_at", None)
            if dst in TERMINAL:
                row.setdefault("ended_at", now)
            if self._write(session, job_id, seen, row, fence=fence):
                self._event(session, job_id, seen, dst, reason, actor, now)
                return src
        raise Conflict(f"job {job_id} kept changing while it was being moved to {dst.value}; try again")

    def cleaned(self, obs: Observation) -> tuple[dict | None, dict | None, dict | None]:
        """(the whole cleaned progress for listeners, the bounded progress the row keeps, the bounded error)."""
        # Listeners (e.g. the per-epoch history) get the whole cleaned report; the row keeps
        # the latest progress only, bounded (the history of epochs has a table of its own).
        reported = sanitize.clean(obs.progress) if obs.progress is not None else None
        progress = sanitize.bounded({k: v for k, v in reported.items() if k != "recent_epochs"}
                                    if isinstance(reported, dict) else reported,
                                    self.progress_max_bytes, PROGRESS_KEEP)
        error = sanitize.bounded(obs.error, self.error_max_bytes, ("code", "status", "message", "replica",
                                                                    "exit_code", "signal", "lost", "cause", "source"))
        return reported, progress, error

    def planned(self, session: Session, obs: Observation, row, progress: dict | None, error: dict | None,
                now: datetime) -> Planned | None:
        """What an observation writes to a job whose row (APPLY_COLUMNS) was just read; None:
        nothing. Shared by `apply` (one job) and lifecycle/bulk.py (a batch in a few statements)."""
        current = S(row.state)
        if current in TERMINAL and obs.state is not None and obs.state != current:
            log.info("job %s: ignoring %s after final %s", obs.job_id, obs.state.value, current.value)
        dst = decide(current, obs.state)
        # Read only for a preempted job's end (the only move whose words name the other job).
        own = row.preempted_for is None or dst not in TERMINAL or \
            self._same_team(session, obs.job_id, row.preempted_for)
        ending, dst, reason, err = _preempted(row, current, dst, obs.reason, error, own)
        values = _changes(obs, row, current, dst, err, progress, now)
        note = obs.note if dst is None and current not in TERMINAL else None
        if note:
            values["updated_at"] = now   # the write that checks the fence and the state for the event
        if not values:
            return None
        if row.waiting_reason is not None and (dst is not None or "backend_ref" in values):
            values["waiting_reason"] = None  # launched: it waits no more
        if current == S.QUEUED and (dst is not None or "backend_ref" in values):
            values["nominated_at"] = None    # launched: what was preempted for it has done its work
        values["updated_at"] = now
        return Planned(obs, row.state, values, dst, reason, ending, note, row.team_id, now)

    def recorded(self, session: Session, p: Planned, actor: str, reported: dict | None,
                 events: list[dict] | None = None) -> None:
        """The event and the listeners of a change `planned` wrote. `events`: a plain event's row is
        appended there for the caller to insert with others (its listeners then run at once: what
        they write commits with it, whatever the order of the statements)."""
        current = S(p.seen)
        if p.dst is not None:
            # The event is when the service learned of the change: the job's ended_at keeps
            # the replica's (or Google's) own end time, which may precede the last recorded
            # event (e.g. RUNNING seen after the process had already ended), and a
            # timeline ordered by time must read as the states followed each other.
            if events is not None and p.ending is None and p.dst != S.FAILED:   # no retry, no preemption
                events.append(self._event_row(p.obs.job_id, p.seen, p.dst, p.reason, actor, p.at))
                context = {"team_id": p.team_id} if p.team_id else None
                self._notify(session, Change(p.obs.job_id, current, p.dst, p.reason, actor, p.at, reported,
                                             context=context))
                return
            self._event(session, p.obs.job_id, p.seen, p.dst, p.reason, actor, p.at, reported,
                        preempted=p.ending is not None, team_id=p.team_id)
        elif p.note:
            row = self._event_row(p.obs.job_id, current.value, current, p.note, actor, p.at)
            if events is not None:
                events.append(row)
            else:
                session.execute(insert(JobEvent), [row])
            self._notify(session, Change(p.obs.job_id, current, None, p.note, actor, p.at, reported))
        elif p.values.get("progress") is not None:
            self._notify(session, Change(p.obs.job_id, current, None, "", actor, p.at, reported))

    def apply(self, session: Session, obs: Observation, *, actor: str = "backend",
              fence: int | None = None) -> bool:
        """Apply what a backend saw. Returns True if the job's state changed."""
        reported, progress, error = self.cleaned(obs)
        for _ in range(CAS_ATTEMPTS):
            row = session.execute(select(*APPLY_COLUMNS).where(Job.id == obs.job_id)).one_or_none()
            if row is None:
                return False
            p = self.planned(session, obs, row, progress, error, utcnow())
            if p is None:
                return False
            if not self._write(session, obs.job_id, row.state, p.values, fence=fence):
                continue  # someone moved it since we read it: decide again from what it is now
            self.recorded(session, p, actor, reported)
            return p.dst is not None
        log.warning("job %s: kept changing under %d attempts to apply %s", obs.job_id, CAS_ATTEMPTS, obs)
        return False

    def mark_launch_attempt(self, session: Session, job_id: uuid.UUID, *, fence: int | None,
                            claim: tuple[str, str] | None = None) -> bool:
        """Record, before a submit, that one is being made (committed by the caller first):
        a backend whose create is not idempotent reads it to never create twice.

        `claim` (backend, why there): the job accepts several backends (Job.accepts) and this
        attempt is on `backend`. The write also claims the job for it (its `backend`, its demand
        there, `placement`, an event), and only if no other backend's attempt claimed it first:
        an unclaimed job has no attempt recorded; a claimed one's attempts are its backend's. So
        two loops that both admit it launch it once, and a controller killed after this commit
        leaves a claim that the next one launches (or adopts) on that backend alone."""
        now = utcnow()
        if claim is None:
            return self._write(session, job_id, S.QUEUED.value, {"launch_attempted_at": now}, fence=fence)
        backend, why = claim
        demand = (select(JobBackend.demand).where(JobBackend.job_id == job_id, JobBackend.backend == backend)
                  .scalar_subquery())
        stmt = update(Job).where(Job.id == job_id, Job.state == S.QUEUED.value,
                                 or_(Job.launch_attempted_at.is_(None), Job.backend == backend))
        if fence is not None:
            stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == fence))
        text = sanitize.clean_text(f"{self._placed_words(session, job_id, backend)}{why}", 500)
        values = {"launch_attempted_at": now, "backend": backend, "demand": demand, "placement": text,
                  "updated_at": now}
        if rows_changed(session.execute(stmt.values(**values))) != 1:
            if fence is not None and not self.fence_holds(session, fence):
                raise Deposed(f"controller epoch {fence} is no longer current")
            return False
        session.execute(insert(JobEvent), [self._event_row(job_id, S.QUEUED.value, S.QUEUED, text, "controller", now)])
        return True

    def _placed_words(self, session: Session, job_id: uuid.UUID, backend: str) -> str:
        """"placed on B: ", or for a preempted job's next attempt on a backend of a shared output folder
        (the only attempts after the first that accept several backends) where it goes on from."""
        shared = (self.output_places.get(backend) or continuation.OutputPlace()).shared
        if shared is not None and session.scalar(select(Job.retry_of).where(Job.id == job_id)) is not None:
            return f"continues on {backend}: its checkpoints are in {shared}; "
        return f"placed on {backend}: "

    def note_waiting(self, session: Session, job_id: uuid.UUID, reason: str, *, fence: int | None) -> None:
        """Why a QUEUED job still waits, in its backend's words (no state change, no event).
        Written only when it differs from what is stored: a waiting job costs no write a pass."""
        text = sanitize.clean_text(reason, 500) or None
        stmt = update(Job).where(Job.id == job_id, Job.state == S.QUEUED.value,
                                 Job.waiting_reason.is_distinct_from(text))
        if fence is not None:
            stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == fence))
        session.execute(stmt.values(waiting_reason=text))

    def clear_launch_attempt(self, session: Session, job_id: uuid.UUID, previous: datetime | None, *,
                             fence: int | None) -> None:
        """The attempt just recorded launched nothing (the backend knows): forget it, so the
        next pass tries again at once instead of waiting for it to settle."""
        self._write(session, job_id, S.QUEUED.value, {"launch_attempted_at": previous}, fence=fence)

    @staticmethod
    def _same_team(session: Session, job_id: uuid.UUID, other: uuid.UUID) -> bool:
        """Whether `other` is a job of `job_id`'s team (a preemption's two jobs: only then may
        the preempted job's team read the other's id)."""
        rows = session.execute(select(Job.team_id).where(Job.id.in_([job_id, other]))).all()
        return len(rows) == 2 and rows[0].team_id == rows[1].team_id

    def request_preemption(self, session: Session, order: PreemptOrder, *, fence: int | None,
                           actor: str = "controller") -> bool:
        """Record that the controller preempts `order.job_id` for `order.for_job` (the caller
        commits, then stops the job through its backend): the victim's preempt_requested_at,
        preempted_for and reason, an event on it (no state change) and the waiting job's
        nominated_at, fenced. False: the victim is no longer running, or already being stopped."""
        now = utcnow()
        stmt = update(Job).where(Job.id == order.job_id, Job.state.in_(preempted.STOPPABLE),
                                 Job.preempt_requested_at.is_(None))
        if fence is not None:
            stmt = stmt.where(exists().where(ControllerLease.name == LEASE, ControllerLease.epoch == fence))
        values = {"preempt_requested_at": now, "preempted_for": order.for_job,
                  "preempt_kind": order.kind, "preempt_reason": order.why[:preempted.REASON_CHARS],
                  "updated_at": now}
        if rows_changed(session.execute(stmt.values(**values))) != 1:
            if fence is not None and not self.fence_holds(session, fence):
                raise Deposed(f"controller epoch {fence} is no longer current")
            return False
        state = session.scalar(select(Job.state).where(Job.id == order.job_id))
        shown = order.for_job if self._same_team(session, order.job_id, order.for_job) else None
        text = f"preemption requested for {preempted.for_job_words(shown, order.for_job)}: {order.why}"
        session.execute(insert(JobEvent), [self._event_row(order.job_id, state, S(state), text, actor, now)])
        session.execute(update(Job).where(Job.id == order.for_job, Job.state == S.QUEUED.value)
                        .values(nominated_at=now))
        return True
