"""What the scheduler reads and what it decides: plain values, no database, no backend.

Resources are named counts: "vcpu", "gpu:NVIDIA_TESLA_A100", "core" ... A backend says what it
offers (capacity) and what each job of it asks (demand) in the same names; the scheduler never
interprets a name, so a new kind of resource needs no change here. Missing keys are 0.

One name is the scheduler's own: SLOT, a backend's launch slots (its limit on the jobs it runs at
once, TRAINJOBS_LOCAL_MAX_RUNNING_JOBS say). Every job holds one; the capacity counts them like
cores, so a full backend is arbitrated (fair order, reclaim from borrowers, priority) as any other
resource is. No quota names it: a team's nominal quota, borrowing and lending limits are in the
operator's resources, and a job inside its nominal quota there reclaims a slot too. The operator's
resource names (service/capacity/schemas.py) can never be "#slots"."""
from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Generic, TypeVar

Resources = Mapping[str, int]
# A job's id: the scheduler only compares ids and orders them by str(); the service's are the
# rows' UUIDs (Running[uuid.UUID] in, Decision[uuid.UUID] out), the pure tests' are strings.
Id = TypeVar("Id", bound=Hashable)
JobId = Hashable        # where any id will do (a memo keyed by it)
SLOT = "#slots"


def quota_part(demand: Resources) -> dict[str, int]:
    """The part of a demand that quotas govern: everything but the launch slot."""
    return {r: n for r, n in demand.items() if n and r != SLOT}


@dataclass(frozen=True)
class Share:
    """A team's part of one backend's capacity (Kueue's ClusterQueue quotas in a cohort).

    nominal: guaranteed; the team gets it back by preemption when others borrowed it.
    borrowing_limit: how much beyond its nominal the team may use; a resource not named may
    borrow without limit. lending_limit: how much of its unused nominal others may borrow; a
    resource not named lends all of it. weight: the fair-share weight (2 = twice the share)."""
    nominal: Resources = field(default_factory=dict)
    borrowing_limit: Resources = field(default_factory=dict)
    lending_limit: Resources = field(default_factory=dict)
    weight: float = 1.0


DEFAULT_SHARE = Share()


@dataclass(frozen=True)
class Running(Generic[Id]):
    """A job holding capacity: launched and not yet ended (a stopping job still holds it).

    stopping: a stop is under way (a preemption or a cancel); stopping_for: the waiting job a
    preemption is for, whose start it then waits for. expected_end: when it will have ended at
    the latest (its start plus its time limit), for the estimates; None if unknown.
    preemptible: False once the job was preempted as often as the policy allows: then no longer
    for priority, so that every job ends in the end (two classes cannot take the same capacity from each other for
    ever). It never shields borrowed capacity: a borrowed job is always reclaimable by a team
    inside its nominal quota (as in Kueue), or a job preempted three times would keep what it
    borrowed for good. checkpoint_at: when its progress last reported a checkpoint (an epoch's
    end), None: none yet; what a preemption loses is its work since then (since its start if
    none). min_runtime_s: how long it runs before a preemption for priority may take it (its
    priority class's; None: the policy's min_runtime_s)."""
    job_id: Id
    team: str
    priority: int
    demand: Resources
    started_at: float
    stopping: bool = False
    stopping_for: Id | None = None
    expected_end: float | None = None
    preemptible: bool = True
    likely_end: float | None = None       # when it will likely end (its template's past runs), for the forecast
    checkpoint_at: float | None = None
    min_runtime_s: float | None = None

    def work_since_checkpoint(self, now: float) -> float:
        """What a preemption now loses: the time since its latest checkpoint (or its start)."""
        return now - max(self.started_at, self.checkpoint_at if self.checkpoint_at is not None else self.started_at)


@dataclass(frozen=True)
class Waiting(Generic[Id]):
    """A job waiting for capacity. may_preempt: its priority class may preempt lower ones.
    nominated: jobs were preempted for it and it has not started since (it goes first)."""
    job_id: Id
    team: str
    priority: int
    demand: Resources
    queued_at: float
    may_preempt: bool = False
    nominated: bool = False
    duration: float | None = None         # how long it will likely run (the forecast's; None: unknown)
    limit: float | None = None            # its time limit in seconds (the forecast's "at the latest")

    # Computed once per value (not fields: equality and replace() ignore them). The controller's
    # memo keeps a waiting job's value between passes (capacity/waiting_memo.py), so a pass over
    # 10,000 waiting jobs no longer builds a tuple and a string for each of them.
    @cached_property
    def kind(self) -> tuple:
        """(team, demand): jobs of one kind fare alike while the pass's ledger stands still."""
        return self.team, tuple(self.demand.items())

    @cached_property
    def order_id(self) -> str:
        """The id as the order's last tie-break compares it."""
        return str(self.job_id)


@dataclass(frozen=True)
class Policy:
    """starve_after_s: a job waiting this long has capacity kept for it as it frees, so a large
    job is never starved by a stream of small ones. max_preemptions_per_pass bounds the work a
    pass may undo at once. estimate_limit: start estimates for this many waiting jobs.
    grace_s: a job preempted now has stopped this long from now at the latest (the estimates).
    forecast_passes / forecast_jobs / forecast_seconds: how far the forecast plays forward (the
    passes it runs, the jobs it places, its time); the jobs beyond keep this pass's order."""
    starve_after_s: float = 1800.0
    max_preemptions_per_pass: int = 16
    estimate_limit: int = 100
    grace_s: float = 30.0
    pass_s: float = 0.0                   # the controller's pass interval: an end is seen at the next pass
    # What the controller measured of its own passes (capacity/passes.py), for the forecast: the
    # recent full passes' own lengths, low and high, of those that launched nothing (a pass starts
    # pass_s after the last one ended); how long one that launches takes (its launches come at its
    # end); when its next pass starts (epoch seconds). None: not known here (the play draws passes
    # 1 to 2 intervals apart, the first at once, and a launch at its pass's start).
    pass_took: tuple[float, float] | None = None
    launch_took: float | None = None
    next_pass_at: float | None = None
    forecast_passes: int = 200
    forecast_jobs: int = 2000
    forecast_seconds: float = 0.3
    # The first jobs in the order that do not fit keep what frees (Slurm's backfill reservation):
    # a later job starts before them only in what is not kept for them. 0: none (a job that does
    # not fit holds back nobody).
    reservations: int = 1
    # How long a job runs before it may be preempted for priority, where its class sets nothing
    # (the service's is TRAINJOBS_SCHEDULER_MIN_RUNTIME_SECONDS, 10 minutes: time for the trainer
    # to reach its first checkpoint). 0: no minimum.
    min_runtime_s: float = 0.0
    # The order's tiers (scheduling/tiers.py's Tier values, in order); empty: tiers.TIERS, the
    # service's. A rule added for a test or a deployment goes here, without editing the pass.
    tiers: tuple = ()


class PreemptionKind(str, Enum):
    RECLAIM = "reclaim"      # a team takes back its nominal quota from a borrower
    PRIORITY = "priority"    # a job of a preempting class displaces a lower-priority one


@dataclass(frozen=True)
class Admitted(Generic[Id]):
    job_id: Id
    team: str
    why: str


@dataclass(frozen=True)
class Preempted(Generic[Id]):
    job_id: Id
    team: str
    for_job: Id
    kind: PreemptionKind
    why: str


@dataclass(frozen=True)
class Queued(Generic[Id]):
    """A job still waiting after the pass: its place (1 = next) and why, in words."""
    job_id: Id
    team: str
    position: int
    why: str
    ahead: int
    estimated_start: float | None = None  # at the latest: the running jobs run to their time limits
    likely_start: float | None = None     # as the forecast plays it (expected durations), if it got there
    reason: str = ""                      # why, without the place ("; 3 jobs ahead")


@dataclass
class Decision(Generic[Id]):
    admit: list[Admitted[Id]] = field(default_factory=list)
    preempt: list[Preempted[Id]] = field(default_factory=list)
    queue: list[Queued[Id]] = field(default_factory=list)
