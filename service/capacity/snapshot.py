"""One backend's shared capacity as the scheduler reads it: the capacity, each team's share,
the jobs holding capacity and the jobs waiting for it, read from the database in a few queries
(service/scheduling is pure: it is given these values and decides).

Only resources the capacity names are arbitrated: a job's demand is cut to them. The backend's
launch slots (its max running jobs) are arbitrated too, as the scheduler's own resource SLOT:
with no capacity set they are the only one, so teams share the slots fairly at the defaults.

The waiting jobs read are each team's oldest TRAINJOBS_SCHEDULER_MAX_WAITING (a window per team:
one team's backlog cannot push another team's jobs out of the planner's sight), and a job's age in
the queue is its first attempt's when it was preempted (it was admitted once: it keeps its place)."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, func, literal, select
from sqlalchemy.orm import Session, aliased

from service.capacity.durations import expected_durations
from service.capacity.waiting_memo import Kept, WaitingMemo, kept_of
from service.core.clock import utcnow
from service.lifecycle.admission import UNLAUNCHED, due, launched_active
from service.lifecycle.quiet import accepted_here, epoch_sum
from service.lifecycle.states import JobState
from service.persistence.models import BackendCapacity, Job, JobBackend, JobEpoch, PriorityClass, Team, TeamShare
from service.scheduling.model import SLOT, Resources, Running, Share, Waiting
from service.scheduling.preference import Wish
from service.usage.store import decayed_by_team


@dataclass(frozen=True)
class Snapshot:
    backend: str
    capacity: dict[str, int]
    shares: dict[str, Share]
    running: list[Running]
    waiting: list[Waiting]
    # Whether the capacity was set through the API (else it is the settings' default, or none).
    capacity_source: str = "none"   # api | settings | none
    # The backend's launch slots (None: it runs any number of jobs at once); each job's demand
    # then holds one SLOT.
    slots: int | None = None
    # Each team's last launch on this backend (seconds), the scheduler's tie-break between teams.
    served: dict[str, float] = field(default_factory=dict)
    # Each team's decayed use over every backend in billing units (service/usage): fair share
    # orders teams by it with what they hold now; a team with none is left out.
    usage: dict[str, float] = field(default_factory=dict)
    # The waiting jobs that accept several backends (placement across backends): each one's
    # backends, most preferred first. A job not named accepts this backend only.
    accepts: dict[uuid.UUID, tuple[str, ...]] = field(default_factory=dict)
    # Those of them with a placement wish (Job.wish: cheapest, soonest, a start_by deadline).
    wishes: dict[uuid.UUID, Wish] = field(default_factory=dict)

    @property
    def arbitrated(self) -> dict[str, int]:
        """The capacity the scheduler arbitrates: the operator's resources and the launch slots."""
        return self.capacity if self.slots is None else {**self.capacity, SLOT: self.slots}


def capacity_of(session: Session, backend: str, defaults: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, int], str]:
    """The backend's capacity: the operator's rows (PUT /v1/capacity/{backend}) if any, else the
    settings' default (TRAINJOBS_CAPACITY), else none (nothing arbitrated)."""
    rows = session.execute(select(BackendCapacity.resource, BackendCapacity.amount)
                           .where(BackendCapacity.backend == backend)).all()
    if rows:
        return {r: int(n) for r, n in rows}, "api"
    if backend in defaults:
        return {r: int(n) for r, n in defaults[backend].items()}, "settings"
    return {}, "none"


def shares_of(session: Session, backend: str) -> dict[str, Share]:
    rows = session.execute(select(Team.name, TeamShare.nominal, TeamShare.borrowing_limit, TeamShare.lending_limit,
                                  TeamShare.weight).join(Team, Team.id == TeamShare.team_id)
                           .where(TeamShare.backend == backend)).all()
    return {name: Share(nominal=_counts(nom), borrowing_limit=_counts(bl), lending_limit=_counts(ll), weight=float(w))
            for name, nom, bl, ll, w in rows}


def _counts(value) -> dict[str, int]:
    return {str(k): int(v) for k, v in (value or {}).items() if isinstance(v, int | float)}


def arbitrated(demand: Mapping | None, capacity: Mapping[str, int]) -> Resources:
    """The part of a job's demand the capacity arbitrates."""
    if not demand:
        return {}
    return {r: int(n) for r, n in demand.items() if r in capacity and isinstance(n, int | float) and n > 0}


def _seconds(at: datetime | None) -> float:
    return at.timestamp() if at is not None else 0.0


def load(session: Session, backend: str, defaults: Mapping[str, Mapping[str, int]], *, max_waiting: int,
         max_preemptions_per_job: int, grace_seconds: float, now: datetime | None = None, slots: int | None = None,
         held_teams: frozenset[uuid.UUID] = frozenset(), forecast: bool = False,
         memo: WaitingMemo | None = None) -> Snapshot:
    """`now`: the controller's clock (a retry's backoff ends by it); None: this process's.
    `slots`: the backend's launch slots (None: no limit). `held_teams`: teams whose own limits
    (budgets) hold their jobs: none of their waiting jobs is read, so they take no capacity in the
    plan and cost nothing until the limit frees (the controller asks the gate once per team).
    `forecast`: also how long each job will likely run (the queue's reads play the plan forward;
    the controller's pass does not). `memo`: the controller loop's waiting jobs from its last
    pass (waiting_memo.py): only the rows written since are read whole."""
    capacity, source = capacity_of(session, backend, defaults)
    shares = shares_of(session, backend)
    # Team names once (teams are few), not a subquery per job row: 10,000 waiting jobs are read
    # on every admission pass.
    names = dict(session.execute(select(Team.id, Team.name)).all())
    slot = {SLOT: 1} if slots is not None else {}
    now = now or utcnow()
    likely = expected_durations(session, backend, names, now) if forecast else {}
    running = []
    for row in session.execute(select(Job.id, Job.team_id, Job.priority, Job.demand, Job.started_at,
                                      Job.launch_attempted_at, Job.created_at, Job.state, Job.preempt_requested_at,
                                      Job.preempted_for, Job.preemptions, _TIMEOUT.label("timeout"),
                                      Job.template_name, _CHECKPOINT.label("checkpoint"), _MIN_RUNTIME.label("min_runtime"))
                               .where(launched_active(backend))):
        started = row.started_at or row.launch_attempted_at or row.created_at
        timeout = _timeout_seconds(row.timeout)
        end = _seconds(started) + timeout if timeout else None
        if row.preempt_requested_at is not None:   # it stops within its grace period at the latest
            stop = _seconds(row.preempt_requested_at) + grace_seconds
            end = stop if end is None else min(end, stop)
        running.append(Running(
            job_id=row.id, team=names.get(row.team_id, "?"), priority=row.priority or 0,
            demand={**arbitrated(row.demand, capacity), **slot},
            started_at=_seconds(started),
            stopping=row.preempt_requested_at is not None or row.state == JobState.CANCELLING.value,
            stopping_for=row.preempted_for, expected_end=end,
            preemptible=(row.preemptions or 0) < max_preemptions_per_job and row.state != JobState.CANCELLING.value,
            likely_end=_likely_end(likely.get((row.team_id, row.template_name)), started, end),
            checkpoint_at=None if row.checkpoint is None else _seconds(row.checkpoint), min_runtime_s=row.min_runtime))

    def build(row) -> Waiting:
        return Waiting(job_id=row.id, team=names.get(row.team_id, "?"), priority=row.priority or 0,
                       demand={**arbitrated(row.demand, capacity), **slot}, queued_at=_seconds(row.queued_at),
                       may_preempt=bool(row.may_preempt), nominated=row.nominated_at is not None,
                       duration=likely.get((row.team_id, row.template_name)) or _timeout_seconds(row.timeout)
                       if forecast else None, limit=_timeout_seconds(row.timeout) if forecast else None)
    kept = _kept(session, memo, backend, now, max_waiting, held_teams, (tuple(names.items()), tuple(capacity), slots is None),
                 build) if memo is not None and not forecast else None
    if kept is None:
        kept = [kept_of(row, build) for row in _windowed(session, backend, now, max_waiting, held_teams, forecast)]
    accepts = {k.waiting.job_id: k.accepts for k in kept if k.accepts}
    wishes = {k.waiting.job_id: Wish(k.wish.get("prefer") or "listed", k.wish.get("start_by"), k.wish.get("prices") or {})
              for k in kept if k.accepts and k.wish}
    return Snapshot(backend, capacity, shares, running, [k.waiting for k in kept], source, slots,
                    served_of(session, backend, names), decayed_by_team(session, names, now), accepts, wishes)


def _kept(session: Session, memo: WaitingMemo, backend: str, now: datetime, per_team: int,
          held_teams: frozenset[uuid.UUID], context: tuple, build) -> list[Kept] | None:
    """The waiting jobs through the loop's memo; None where some job accepts this backend among
    others (the full read merges those in: not kept)."""
    if session.execute(select(accepted_here(backend))).scalar():
        memo.forget()
        return None

    # Core statements on the session's connection: the ORM's row loading cost as much as the
    # database's answer for 10,000 narrow rows.
    connection = session.connection()

    def mark() -> tuple:
        return tuple(connection.execute(select(
            func.count(), epoch_sum(session, Job.updated_at), func.max(Job.updated_at), func.count(Job.nominated_at),
            epoch_sum(session, Job.created_at)).where(*_where(backend, now, held_teams))).one())

    def read_rows(ids: list | None) -> list:
        return list(connection.execute(_waiting(backend, now, per_team, held_teams, False, ids=ids)).all())

    def list_ids() -> list:
        return list(connection.execute(_waiting(backend, now, per_team, held_teams, False, narrow=True)).all())
    return memo.waiting((context, held_teams, per_team, backend), mark, list_ids, read_rows, build)


def _windowed(session: Session, backend: str, now: datetime, per_team: int, held_teams: frozenset[uuid.UUID],
              forecast: bool) -> list:
    """The waiting jobs: those whose backend is this one, and those that accept it among others and
    are not claimed by another yet (ix_job_backends_backend: nothing to read where none does),
    each team's oldest `per_team` of both together, oldest first."""
    rows = session.execute(_waiting(backend, now, per_team, held_teams, forecast)).all()
    # The join only where some job accepts this backend among others (an index probe first).
    others = session.execute(_waiting(backend, now, per_team, held_teams, forecast, elsewhere=True)).all() \
        if session.execute(select(accepted_here(backend))).scalar() else []
    if not others:
        return list(rows)
    kept: dict = {}
    out = []
    for row in sorted([*rows, *others], key=lambda r: (r.queued_at, r.id)):
        kept[row.team_id] = kept.get(row.team_id, 0) + 1
        if kept[row.team_id] <= per_team:
            out.append(row)
    return out


_FIRST = aliased(Job)
# A job's age in the queue: a preempted job's next attempt keeps its first attempt's (it was
# admitted once; a person expects it to go on, not to queue again behind everything since).
QUEUED_AT = case((Job.preemptions > 0, func.coalesce(
    select(_FIRST.created_at).where(_FIRST.id == Job.retry_of).correlate(Job).scalar_subquery(), Job.created_at)),
    else_=Job.created_at)


def _where(backend: str, now: datetime, held_teams: frozenset[uuid.UUID]) -> list:
    """The jobs waiting for this backend, due, of teams not held (the first three always these)."""
    return [Job.backend == backend, UNLAUNCHED, due(now), *([Job.team_id.not_in(held_teams)] if held_teams else [])]


def _waiting(backend: str, now: datetime, per_team: int, held_teams: frozenset[uuid.UUID], forecast: bool,
             elsewhere: bool = False, *, narrow: bool = False, ids: list | None = None):
    """Each team's oldest `per_team` waiting jobs, oldest first (with their template and time
    limit for a forecast). `elsewhere`: the jobs whose backend is still another's (their most
    preferred) but that accept this one too, not yet claimed, with their demand here. `narrow`:
    only each one's id, `updated_at` and whether it is nominated (waiting_memo.py); `ids`: the rows
    of these jobs alone (still waiting), each with every column the full read has."""
    where = _where(backend, now, held_teams)
    demand = Job.demand
    if elsewhere:
        where = [JobBackend.backend == backend, Job.id == JobBackend.job_id, Job.backend != backend, UNLAUNCHED,
                 Job.launch_attempted_at.is_(None), due(now), *where[3:]]
        demand = JobBackend.demand
    extra = (Job.template_name, _TIMEOUT.label("timeout")) if forecast else (
        literal(None).label("template_name"), literal(None).label("timeout"))
    columns = (Job.id, Job.updated_at, Job.nominated_at.is_not(None).label("nominated")) if narrow else (
        Job.id, Job.team_id, Job.priority, demand.label("demand"), QUEUED_AT.label("queued_at"), Job.may_preempt,
        Job.nominated_at, Job.accepts, Job.wish, Job.updated_at, *extra)
    if ids is not None:
        return select(*columns).where(*where, Job.id.in_(ids))
    at = (QUEUED_AT.label("queued_at"),) if narrow else ()    # the order's key
    ranked = (select(*columns, *at, func.row_number().over(partition_by=Job.team_id, order_by=(QUEUED_AT, Job.id))
                     .label("rank")).where(*where).subquery())
    return (select(*[ranked.c[c.name] for c in columns]).where(ranked.c.rank <= per_team)
            .order_by(ranked.c.queued_at, ranked.c.id))


def served_of(session: Session, backend: str, names: Mapping[uuid.UUID, str]) -> dict[str, float]:
    """Each team's last launch on the backend: one index seek per team (ix_jobs_backend_team_launch)."""
    last = (select(func.max(Job.launch_attempted_at)).where(Job.backend == backend, Job.team_id == Team.id)
            .correlate(Team).scalar_subquery())
    return {names.get(team_id, "?"): _seconds(at) for team_id, at in session.execute(select(Team.id, last))
            if at is not None}


# The job's time limit (its CustomJob's scheduling.timeout, "3600s"), read by the database: the
# whole compiled job of every running job (~10 KB of JSON each, 3,000 on a busy Vertex project)
# was decoded on every admission pass for this one field.
_TIMEOUT = Job.compiled[("custom_job", "jobSpec", "scheduling", "timeout")].as_string()
# A preemption loses the work since the job's latest checkpoint: the trainer saves one at every
# epoch's end, so its latest epoch's (one seek in uq_job_epochs_job_epoch per running job).
_CHECKPOINT = (select(JobEpoch.at).where(JobEpoch.job_id == Job.id).order_by(JobEpoch.epoch.desc()).limit(1)
               .correlate(Job).scalar_subquery())
# Its priority class's minimum runtime (null: none set, or no class: the setting's).
_MIN_RUNTIME = (select(PriorityClass.min_runtime_seconds).where(PriorityClass.name == Job.priority_class)
                .correlate(Job).scalar_subquery())


def _likely_end(duration: float | None, started: datetime | None, limit_end: float | None) -> float | None:
    """When a running job will likely end: its start plus its template's usual run time (never
    after its time limit); unknown: None (the forecast then takes its time limit)."""
    if duration is None:
        return None
    end = _seconds(started) + duration
    return end if limit_end is None else min(end, limit_end)


def _timeout_seconds(raw: str | None) -> float | None:
    """The time limit in seconds, for start estimates; None where there is none (or it is not a duration)."""
    try:
        seconds = float(str(raw).rstrip("s")) if raw else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds > 0 and seconds != float("inf") else None
