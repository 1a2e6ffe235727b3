"""One backend's shared capacity as the scheduler reads it: the capacity, each team's share,
the jobs holding capacity and the jobs waiting for it, read from the database in a few queries
(service/scheduling is pure: it is given these values and decides).

Only resources the capacity names are arbitrated: a job's demand is cut to them, so a backend
whose capacity names nothing admits every job (its own cap, max_running, still applies)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.clock import utcnow
from service.lifecycle.admission import UNLAUNCHED, due, launched_active
from service.lifecycle.states import JobState
from service.persistence.models import BackendCapacity, Job, Team, TeamShare
from service.scheduling.model import Resources, Running, Share, Waiting


@dataclass(frozen=True)
class Snapshot:
    backend: str
    capacity: dict[str, int]
    shares: dict[str, Share]
    running: list[Running]
    waiting: list[Waiting]
    # Whether the capacity was set through the API (else it is the settings' default, or none).
    capacity_source: str = "none"   # api | settings | none


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
         max_preemptions_per_job: int, grace_seconds: float, now: datetime | None = None) -> Snapshot:
    """`now`: the controller's clock (a retry's backoff ends by it); None: this process's."""
    capacity, source = capacity_of(session, backend, defaults)
    shares = shares_of(session, backend)
    # Team names once (teams are few), not a subquery per job row: 10,000 waiting jobs are read
    # on every admission pass.
    names = dict(session.execute(select(Team.id, Team.name)).all())
    running = []
    for row in session.execute(select(Job.id, Job.team_id, Job.priority, Job.demand, Job.started_at,
                                      Job.launch_attempted_at, Job.created_at, Job.state, Job.preempt_requested_at,
                                      Job.preempted_for, Job.preemptions, _TIMEOUT.label("timeout"))
                               .where(launched_active(backend))):
        started = row.started_at or row.launch_attempted_at or row.created_at
        timeout = _timeout_seconds(row.timeout)
        end = _seconds(started) + timeout if timeout else None
        if row.preempt_requested_at is not None:   # it stops within its grace period at the latest
            stop = _seconds(row.preempt_requested_at) + grace_seconds
            end = stop if end is None else min(end, stop)
        running.append(Running(
            job_id=row.id, team=names.get(row.team_id, "?"), priority=row.priority or 0, demand=arbitrated(row.demand, capacity),
            started_at=_seconds(started),
            stopping=row.preempt_requested_at is not None or row.state == JobState.CANCELLING.value,
            stopping_for=row.preempted_for, expected_end=end,
            preemptible=(row.preemptions or 0) < max_preemptions_per_job and row.state != JobState.CANCELLING.value))
    waiting = [Waiting(job_id=row.id, team=names.get(row.team_id, "?"), priority=row.priority or 0,
                       demand=arbitrated(row.demand, capacity), queued_at=_seconds(row.created_at),
                       may_preempt=bool(row.may_preempt), nominated=row.nominated_at is not None)
               for row in session.execute(
                   select(Job.id, Job.team_id, Job.priority, Job.demand, Job.created_at, Job.may_preempt,
                          Job.nominated_at)
                   .where(Job.backend == backend, UNLAUNCHED, due(now or utcnow()))
                   .order_by(Job.created_at, Job.id).limit(max_waiting))]
    return Snapshot(backend, capacity, shares, running, waiting, source)


# The job's time limit (its CustomJob's scheduling.timeout, "3600s"), read by the database: the
# whole compiled job of every running job (~10 KB of JSON each, 3,000 on a busy Vertex project)
# was decoded on every admission pass for this one field.
_TIMEOUT = Job.compiled[("custom_job", "jobSpec", "scheduling", "timeout")].as_string()


def _timeout_seconds(raw: str | None) -> float | None:
    """The time limit in seconds, for start estimates; None where there is none (or it is not a duration)."""
    try:
        seconds = float(str(raw).rstrip("s")) if raw else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds > 0 and seconds != float("inf") else None
