"""What GET /v1/queue answers (service/capacity/queue.py builds it)."""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

CapacitySource = Literal["api", "settings", "none"]


class TeamUse(BaseModel):
    team: str
    nominal: dict[str, int] = Field(description="The team's guaranteed quota per resource (its share)")
    use: dict[str, int] = Field(description="What the team's running jobs hold, per arbitrated resource")
    borrowed: dict[str, int] = Field(description="The part of `use` beyond `nominal`: idle capacity of others, "
                                                 "which may be reclaimed by preemption")
    weight: float = Field(description="The team's fair-share weight (2 = twice the share of weight 1)")
    has_share: bool = Field(description="False: the team has no share on this backend (nominal 0, weight 1)")
    running_jobs: int
    waiting_jobs: int


Tier = Literal["nominated", "nominal", "starving", "fair"]
Decider = Literal["tier", "fair_share", "turn", "priority", "age", "forecast"]


class FairShare(BaseModel):
    """A team's fair share as the scheduler compares it now (docs/queue.md, "Why this job and not mine")."""
    rank: int = Field(description="The team's place in the fair order between the teams with waiting jobs now "
                                  "(1: first; teams that stand alike share one)")
    borrowed: float = Field(description="The largest part of a resource the team uses beyond its nominal quota, "
                                        "plus its past use (`usage`), divided by its weight; the smallest goes first")
    held: float = Field(description="Its dominant share: the largest part of a resource it uses (launch slots "
                                    "included), plus its past use, divided by its weight; compared next")
    running_jobs: float = Field(description="The jobs it runs, divided by its weight; compared last")
    weight: float = Field(description="The team's fair-share weight")
    usage: float | None = Field(None, description="Its past use: its part of every team's decayed use over every "
                                                  "backend (0 to 1; GET /v1/usage has the units), added to borrowed "
                                                  "and held before the weight divides them; null: no team has any "
                                                  "recorded")


class QueueFactors(BaseModel):
    """A waiting job's priority in parts, like Slurm's sprio. The scheduler orders by tiers, not by a
    weighted sum: the tier first, then the parts it reads there. Another team's entries carry only
    the parts the queue already shows (its team's fair share, its priority, its size)."""
    tier: Tier | None = Field(None, description="nominated: running jobs were preempted for it; nominal: it keeps "
                                                "its team inside its nominal quota; starving: it waited past "
                                                "TRAINJOBS_SCHEDULER_STARVE_AFTER_SECONDS; fair: the rest, in fair "
                                                "order between teams (your own team's jobs only)")
    fair_share: FairShare
    priority: int = Field(description="Its priority class's value: higher goes first within its team")
    priority_class: str | None = Field(None, description="Its priority class (null: none; your own team's jobs only)")
    waited_seconds: float | None = Field(None, description="How long it has waited (a preempted job's new attempt: "
                                                           "since its first attempt; your own team's jobs only)")
    size: float = Field(description="The largest part of an arbitrated resource its demand asks (1: the whole "
                                    "backend): a job that does not fit holds back nobody")
    decided_by: Decider | None = Field(
        None, description="The part that put the job just ahead of it there: its tier, its team's fair share, its "
                          "team's turn (served least recently), its priority, its age (older), or forecast (as things "
                          "stand now this job would go first, but the job ahead starts first as the queue plays "
                          "forward); null for the first (your own team's jobs only)")


class QueueEntry(BaseModel):
    """A waiting job. Another team's entries carry only team, position, priority and demand."""
    position: int = Field(description="0: the planner starts it on its next pass; 1: next in line; ...")
    team: str
    priority: int
    demand: dict[str, int] = Field(description="What it asks of the resources this backend's capacity arbitrates")
    id: uuid.UUID | None = Field(None, description="Your own team's jobs only")
    display_name: str | None = Field(None, description="Your own team's jobs only")
    why: str | None = Field(None, description="What it waits for, in words (your own team's jobs only)")
    ahead: int | None = Field(None, description="Waiting jobs ahead of it (your own team's jobs only)")
    likely_start: datetime | None = Field(
        None, description="When it will likely start: the queue played forward with each job's expected run time "
                          "(its template's recent runs, else its time limit), nothing new arriving; null where "
                          "the forecast does not reach it (your own team's jobs "
                          "only)")
    estimated_start: datetime | None = Field(
        None, description="When it starts at the latest if nothing new of a higher priority arrives: every "
                          "running job to its time limit; null where nothing known frees enough (your own "
                          "team's jobs only)")
    factors: QueueFactors | None = Field(None, description="Its priority in parts and what decided its place "
                                                           "(docs/queue.md, \"Why this job and not mine\")")


class QueuePlace(BaseModel):
    """Where a waiting job stands in its backend's queue (a job's view, GET /v1/jobs/{id}; docs/queue.md)."""

    position: int | None = Field(description="0: the planner starts it on its next pass; 1: next in line; ...; "
                                             "null: not in the queue computed at `computed_at` (submitted or "
                                             "requeued after it): `why` says so, and the next computation places it")
    why: str = Field(description="What it waits for, in words")
    ahead: int | None = Field(description="Waiting jobs ahead of it (all teams); null with `position` null")
    computed_at: datetime | None = Field(None, description="When the queue this place is read from was computed: "
                                                           "what it says is that old")
    likely_start: datetime | None = Field(
        None, description="When it will likely start: the queue played forward with each job's expected run time "
                          "(its template's recent runs, else its time limit), nothing new arriving; null where "
                          "the forecast does not reach it")
    estimated_start: datetime | None = Field(
        None, description="When it starts at the latest if nothing new of a higher priority arrives: every "
                          "running job to its time limit; null where nothing known frees enough")
    factors: QueueFactors | None = Field(None, description="Its priority in parts and what decided its place "
                                                           "(docs/queue.md, \"Why this job and not mine\")")


class BackendQueue(BaseModel):
    backend: str
    computed_at: datetime = Field(description="When this was computed: what it shows is that old (a computation "
                                              "is shown for TRAINJOBS_QUEUE_CACHE_SECONDS, and past that until "
                                              "the next one is ready)")
    capacity: dict[str, int] = Field(description="What the backend runs at once, per resource; empty: nothing "
                                                 "arbitrated (every job fits; the backend's own cap still holds)")
    capacity_source: CapacitySource = Field(
        description="api: set by an operator (PUT /v1/capacity/{backend}); settings: TRAINJOBS_CAPACITY; none")
    in_use: dict[str, int]
    free: dict[str, int]
    teams: list[TeamUse]
    running_jobs: int
    waiting_jobs: int = Field(description="Every waiting job (all teams), whatever `limit` shows")
    starting_jobs: int = Field(description="Waiting jobs that fit now: the planner starts them on its next pass")
    waiting_truncated: bool = Field(description="More jobs wait than the scheduler reads in one pass "
                                                "(TRAINJOBS_SCHEDULER_MAX_WAITING): the counts stop there")
    waiting: list[QueueEntry] = Field(description="The waiting jobs in order, from `offset`, at most `limit`")
    next_offset: int | None = Field(None, description="Pass as `offset` for the next entries; null: no more")


class QueueList(BaseModel):
    items: list[BackendQueue] = Field(description="One per backend asked for (every enabled backend by default)")
