"""One backend's queue as members read it (GET /v1/queue, a waiting job's view, `trainjobs
queue`, /ui/queue): the planner's snapshot and decision, computed read-only, turned into what a
caller of one team may see.

Privacy: the service is shared by teams that do not trust each other with their jobs. The
caller's own team's waiting jobs come with their id, name, why and estimate; another team's
only with its team name, position, priority and demand (no id, no name, no labels, no why: a
why may name what the job waits for)."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.capacity.queue_schemas import (
    BackendQueue,
    CapacitySource,
    QueueEntry,
    QueueFactors,
    QueuePlace,
    TeamUse,
)
from service.capacity.snapshot import Snapshot
from service.persistence.models import Job
from service.scheduling.factors import Factors, factors
from service.scheduling.model import Decision, Policy, Queued, Waiting, quota_part

STARTING = "about to start"


@dataclass(frozen=True)
class Computed:
    """One computation of one backend's queue: shared by every caller until it is stale. What
    does not depend on the caller (use per team, in use, the order) is worked out here once,
    so a cached read costs only its page."""
    backend: str
    at: datetime
    snapshot: Snapshot
    decision: Decision
    # Every waiting job's place, as the scheduler says it (its Queued, the one type for a place):
    # the jobs the planner would start now first (position 0), then the jobs that still wait (1 = next).
    notes: dict[uuid.UUID, Queued[uuid.UUID]]
    order: list[tuple[uuid.UUID, Queued[uuid.UUID]]]
    waiting: dict[uuid.UUID, Waiting]
    in_use: dict[str, int]
    teams: list[TeamUse]
    starting: int = 0    # the admits the controller launches on its next pass
    factors: Mapping[uuid.UUID, Factors] = field(default_factory=dict)   # each job's priority in parts

    @classmethod
    def of(cls, snap: Snapshot, decision: Decision, at: datetime, policy: Policy | None = None) -> Computed:
        """The planner arbitrates the launch slots itself (snap.slots, the scheduler's SLOT): what
        it admits is what the controller's next pass launches, and every other job's place and
        why (a slot included) are the scheduler's own, written once. `policy`: the planner's (the
        starvation limit names a job's tier)."""
        order = [(a.job_id, Queued(a.job_id, a.team, 0, f"{STARTING}: {a.why}", 0, at.timestamp()))
                 for a in decision.admit]
        order += [(q.job_id, q) for q in decision.queue]
        parts = factors(snap.arbitrated, snap.shares, snap.running, snap.waiting, [job_id for job_id, _ in order],
                        at.timestamp(), policy or Policy(), served=snap.served, usage=snap.usage)
        return cls(snap.backend, at, snap, decision, dict(order), order,
                   {j.job_id: j for j in snap.waiting}, _sum(quota_part(j.demand) for j in snap.running),
                   team_uses(snap), len(decision.admit), parts)


def _at(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _sum(demands) -> dict[str, int]:
    out: dict[str, int] = {}
    for demand in demands:
        for r, n in demand.items():
            out[r] = out.get(r, 0) + n
    return out


def team_uses(snap: Snapshot) -> list[TeamUse]:
    """Per team: its share (nominal, weight), what its running jobs use, what of that is
    borrowed (beyond its nominal), and how many of its jobs run and wait. One pass over the jobs."""
    use: dict[str, dict[str, int]] = {team: {} for team in snap.shares}
    running: dict[str, int] = dict.fromkeys(snap.shares, 0)
    waiting: dict[str, int] = dict.fromkeys(snap.shares, 0)
    for job in snap.running:
        mine = use.setdefault(job.team, {})
        for r, n in quota_part(job.demand).items():
            mine[r] = mine.get(r, 0) + n
        running[job.team] = running.get(job.team, 0) + 1
    for w in snap.waiting:
        waiting[w.team] = waiting.get(w.team, 0) + 1
    out = []
    for team in sorted(set(use) | set(waiting)):
        share = snap.shares.get(team)
        nominal = dict(share.nominal) if share else {}
        used = use.get(team, {})
        borrowed = {r: u - nominal.get(r, 0) for r, u in used.items() if u > nominal.get(r, 0)}
        out.append(TeamUse(team=team, nominal=nominal, use=used, borrowed=borrowed,
                           weight=share.weight if share else 1.0, running_jobs=running.get(team, 0),
                           waiting_jobs=waiting.get(team, 0), has_share=share is not None))
    return out


def view(session: Session, computed: Computed, team: str, team_id: uuid.UUID, *, limit: int,
         offset: int = 0, max_waiting: int | None = None) -> BackendQueue:
    """What a caller of `team` sees of the computed queue: counts complete, the waiting
    entries in order from the `offset`-th on, at most `limit`."""
    waiting = computed.waiting
    page = computed.order[offset:offset + limit]
    mine = own_rows(session, [job_id for job_id, _ in page if waiting[job_id].team == team], team_id)
    entries = []
    for job_id, note in page:
        job = waiting[job_id]
        # The team name and the job's team row must agree: a job is shown as ours only if both say so.
        own = mine.get(job_id) if job.team == team else None
        entries.append(entry(computed, job_id, note, own))
    return head(computed, max_waiting).model_copy(update={
        "waiting": entries, "next_offset": offset + limit if offset + limit < len(computed.order) else None})


def head(computed: Computed, max_waiting: int | None) -> BackendQueue:
    """What every caller reads alike of the computed queue (counts, teams, capacity), no entries."""
    snap, in_use = computed.snapshot, computed.in_use
    return BackendQueue(
        backend=computed.backend, computed_at=computed.at, capacity=dict(snap.capacity),
        capacity_source=cast(CapacitySource, snap.capacity_source), in_use=in_use,
        free={r: max(0, n - in_use.get(r, 0)) for r, n in snap.capacity.items()},
        teams=computed.teams, running_jobs=len(snap.running), waiting_jobs=len(computed.order),
        starting_jobs=computed.starting,
        waiting_truncated=max_waiting is not None and len(snap.waiting) >= max_waiting, waiting=[])


def own_places(session: Session, computed: Computed, team: str, team_id: uuid.UUID, *,
               limit: int) -> list[QueueEntry]:
    """The caller's own team's waiting jobs wherever they stand in the order (the first
    `limit`), with their places and starts: what the Queue page's first page sums up."""
    ours = [(job_id, note) for job_id, note in computed.order if computed.waiting[job_id].team == team][:limit]
    mine = own_rows(session, [job_id for job_id, _ in ours], team_id)
    return [entry(computed, job_id, note, mine[job_id]) for job_id, note in ours if job_id in mine]


def place(computed: Computed, job_id: uuid.UUID, priority_class: str | None) -> QueuePlace | None:
    """A waiting job's own place, for its view (the job's reader may see it: the caller checked)."""
    note = computed.notes.get(job_id)
    if note is None:
        return None
    return QueuePlace(position=note.position, computed_at=computed.at, **_place(computed, job_id, note, priority_class))


def entry(computed: Computed, job_id: uuid.UUID, note: Queued[uuid.UUID], own: tuple[str, str | None] | None) -> QueueEntry:
    """One entry of the order: another team's with its team, position, priority, demand and the parts
    of its factors that say no more; one of the caller's team (`own`: its name and class) with all."""
    job = computed.waiting[job_id]
    entry = QueueEntry(position=note.position, team=job.team, priority=job.priority, demand=quota_part(job.demand))
    if own is None:
        parts = computed.factors.get(job_id)
        return entry.model_copy(update={"factors": None if parts is None else _public(parts)})
    name, priority_class = own
    return entry.model_copy(update={"id": job_id, "display_name": name,
                                    **_place(computed, job_id, note, priority_class)})


def own_place(computed: Computed, job_id: uuid.UUID, note: Queued[uuid.UUID]) -> dict:
    """_place with no priority class (the reader's read fills it in: capacity/queue_pages.py)."""
    return _place(computed, job_id, note, None)


def _place(computed: Computed, job_id: uuid.UUID, note: Queued[uuid.UUID], priority_class: str | None) -> dict:
    """The fields a waiting job's own team reads, in the queue and in the job's view alike."""
    parts = computed.factors.get(job_id)
    return {"why": note.why, "ahead": note.ahead, "estimated_start": _at(note.estimated_start),
            "likely_start": _at(note.likely_start),
            "factors": None if parts is None else _public(parts).model_copy(update={
                "tier": parts.tier, "priority_class": priority_class, "waited_seconds": round(parts.waited_s, 1),
                "decided_by": parts.decided_by})}


def _public(parts: Factors) -> QueueFactors:
    """The parts anyone may read, as the model (public_fields says which)."""
    return QueueFactors.model_validate(public_fields(parts))


def public_fields(parts: Factors) -> dict:
    """The parts anyone may read: the team's fair share (its use and share are shown), the priority
    and the size (its demand and the capacity are shown). Plain values, typed as QueueFactors'
    fields (capacity/queue_pages.py serializes them without the model)."""
    s = parts.fair_share
    return {"fair_share": {"rank": int(s.rank), "borrowed": float(round(s.borrowed, 4)), "held": float(round(s.held, 4)),
                           "running_jobs": float(round(s.running_jobs, 4)), "weight": float(s.weight),
                           "usage": None if s.usage is None else float(round(s.usage, 4))},
            "priority": int(parts.priority), "size": float(round(parts.size, 4))}


def own_rows(session: Session, ids: list, team_id: uuid.UUID) -> Mapping[uuid.UUID, tuple[str, str | None]]:
    """The caller's team's jobs among `ids`: each one's name and priority class."""
    if not ids:
        return {}
    rows = session.execute(select(Job.id, Job.display_name, Job.priority_class)
                           .where(Job.id.in_(ids), Job.team_id == team_id))
    return {job_id: (name, priority_class) for job_id, name, priority_class in rows}
