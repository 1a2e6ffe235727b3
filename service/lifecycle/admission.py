"""Which QUEUED jobs a backend may start now: the jobs the controller's CapacityPlanner
(service/capacity) admits, in the plan's order, within the backend's room on this pass.

The same rule for every backend. A job is *launched* once it has a backend reference or has
left QUEUED; launched, unfinished jobs count against the backend's cap (its launch slots, which
the planner arbitrates). The plan's order is the order, and a job the backend holds back
("later") holds back nobody else. A retry attempt still in its backoff (`not_before` in the
future) is not in the queue yet: it waits, and blocks nobody. (A first-come-first-served path
for a controller without a planner is gone: the service always has one.)"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy import and_, func, literal_column, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnClause

from service.lifecycle.handles import read_handles
from service.lifecycle.protocol import Capabilities
from service.lifecycle.states import ACTIVE, JobState
from service.persistence.models import Job
from service.scheduling.model import Queued

_ACTIVE = [s.value for s in ACTIVE]
UNLAUNCHED = and_(Job.state == JobState.QUEUED.value, Job.backend_ref.is_(None))


# The states a launched job may be in besides QUEUED, as constants in the SQL text, not
# parameters: a prepared statement's generic plan still knows it reads few rows.
_LAUNCHED_STATES: list[ColumnClause[str]] = [literal_column(f"'{s}'") for s in sorted(set(_ACTIVE) - {JobState.QUEUED.value})]


def launched_active(backend: str):
    """The backend's launched, unfinished jobs: not QUEUED, or QUEUED with a backend
    reference. Each arm of the OR has an index (ix_jobs_backend_state_created, and the
    partial ix_jobs_backend_launched): every controller pass reads this, and the plain
    `state IN (active) AND NOT unlaunched` made the database visit every QUEUED job (5 ms a
    query with 10,000 queued, three queries a pass, a pass per burst of submits)."""
    return and_(Job.backend == backend,
                or_(Job.state.in_(_LAUNCHED_STATES),
                    and_(Job.state == literal_column(f"'{JobState.QUEUED.value}'"), Job.backend_ref.is_not(None))))


def running_count(session: Session, backend: str) -> int:
    return session.execute(select(func.count()).select_from(Job).where(launched_active(backend))).scalar_one()


def room(session: Session, backend: str, caps: Capabilities, batch: int) -> int:
    """How many jobs this backend may launch on this pass."""
    free = batch
    if caps.max_running is not None:
        free = min(free, caps.max_running - running_count(session, backend))
    if caps.max_submits_per_pass is not None:
        free = min(free, caps.max_submits_per_pass)
    return free


def in_plan_order(session: Session, ids: list[uuid.UUID]) -> list:
    """The rows of the jobs a CapacityPlanner admits, in its order (those still waiting)."""
    if not ids:
        return []
    place = {job_id: i for i, job_id in enumerate(ids)}
    rows = read_handles(session, [Job.id.in_(ids), UNLAUNCHED])
    return sorted(rows, key=lambda r: place[r.id])


def due(now: datetime):
    """Not held back by a retry backoff."""
    return or_(Job.not_before.is_(None), Job.not_before <= now)


class AdmissionGate(Protocol):
    """Policy from outside the lifecycle (e.g. team budgets) that may hold a QUEUED job back.
    start_pass() returns the check for one pass: check(session, job_id) -> why the job must
    wait, or None. It runs in the transaction that then records the launch attempt and may
    lock rows there, so that its decision and the attempt commit together."""

    def start_pass(self) -> Callable[[Session, uuid.UUID], str | None]: ...


def waiting_cancelled(backend: str):
    """Jobs cancelled while still waiting: never launched, so nothing to stop."""
    return and_(Job.backend == backend, Job.state == JobState.CANCELLING.value,
                Job.backend_ref.is_(None), Job.launch_attempted_at.is_(None))


def cancelling(backend: str):
    return and_(Job.backend == backend, Job.state == JobState.CANCELLING.value,
                or_(Job.backend_ref.is_not(None), Job.launch_attempted_at.is_not(None)))


@dataclass(frozen=True)
class PreemptOrder:
    """A running job to stop gracefully so that `for_job` can start; `kind` is "reclaim" (a team
    takes back its nominal quota from a borrower) or "priority"; `why` in words."""

    job_id: uuid.UUID
    for_job: uuid.UUID
    kind: str
    why: str


@dataclass(frozen=True)
class Plan:
    """One admission pass's decision for one backend (service/capacity builds it with the pure
    scheduler, service/scheduling): the waiting jobs to launch now, in order; the running jobs to
    preempt for waiting ones; and every other waiting job's place and why, as the scheduler says it
    (its Queued: one type for a waiting job's place, from the scheduler to the API's schemas)."""

    admit: list[uuid.UUID] = field(default_factory=list)
    preempt: list[PreemptOrder] = field(default_factory=list)
    waiting: dict[uuid.UUID, Queued[uuid.UUID]] = field(default_factory=dict)
    # Jobs that accept several backends, admitted here: why here, in words (the launch's claim
    # records it: the job view's `placement`, an event).
    why: dict[uuid.UUID, str] = field(default_factory=dict)


class CapacityPlanner(Protocol):
    """Who launches next and who is preempted, decided from outside the lifecycle (the shared
    capacity domain, service/capacity). plan() reads what it needs in `session` (read only: the
    controller writes what it decides through the engine, fenced). explain=False: the plan's
    `waiting` notes are left out (the controller acts on admit and preempt only); `room`: the
    backend's free launch slots, which may spare the planner its read; `slots`: its launch slots in
    all (max_running), arbitrated like any resource; `held_teams`: the ids of teams whose own limits
    (the AdmissionGate) hold their jobs: the plan leaves their waiting jobs out; `memo`: what one
    controller loop keeps between its plans (new_memo(); one per loop and term, used by its thread
    alone), so that a plan reads only what changed since the last."""

    def plan(self, session: Session, backend: str, now: datetime, *, explain: bool = True,
             room: int | None = None, slots: int | None = None, held_teams: frozenset = frozenset(),
             memo: object | None = None) -> Plan: ...

    def new_memo(self) -> object | None: ...
