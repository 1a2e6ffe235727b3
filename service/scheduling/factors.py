"""Every waiting job's priority in parts, like Slurm's `sprio`, and the part that put the job ahead
of it where it is (issue 52.4: "why this job and not mine").

The scheduler adds no weighted factors up (Slurm's multifactor plugin does; this one does not):
it orders by tiers, first the jobs that running jobs were preempted for, then the jobs that keep
their team inside its nominal quota, then the jobs that waited past the starvation limit, then the
rest; between teams by fair share (then the team served least recently), within a team by
priority, then age (scheduler.py). So the parts tell that truth: the tier a job is in, then the
parts that order reads there, never a sum the scheduler does not use.

The parts are as things stand now (the pass's own Ledger reads the fair-share standings); the
order they explain is the predicted start order (forecast.py), in which jobs start and end. Where
the parts as they stand now would put a job before the one ahead of it, that one starts first in
the play: capacity frees for it sooner, or the standings change as jobs start and end, and the
part that decided says so ("forecast"). Pure: plain values in, plain values out."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from service.scheduling.ledger import Ledger
from service.scheduling.model import Id, JobId, Policy, Resources, Running, Share, Waiting
from service.scheduling.tiers import Scene, Tier, tier_of, tiers_of

# What put the job ahead of a job there: its tier, its team's fair share, its team's turn (served
# least recently), its priority, its age, or the play forward (see the docstring).
DECIDERS = ("tier", "fair_share", "turn", "priority", "age", "forecast")


@dataclass(frozen=True)
class Standing:
    """A team's fair share now: its place among the teams with waiting jobs (1 = first; teams that
    stand alike share one), and what the fair order compares (Ledger.fair_key), each divided by the
    team's weight: the largest part of a resource it uses beyond its nominal quota, then its
    dominant share (the largest part of a resource it uses, launch slots included), each plus its
    past use; then the jobs it runs. usage: that past use, the team's part of every team's decayed
    use over every backend (0 to 1; None: no team has any recorded)."""
    rank: int
    borrowed: float
    held: float
    running_jobs: float
    weight: float
    usage: float | None = None


@dataclass(frozen=True)
class Factors:
    """One waiting job's parts. size: the largest part of an arbitrated resource its demand asks
    (1.0: the whole backend). decided_by: the part that put the job ahead of it there (one of
    DECIDERS; None for the first)."""
    tier: str
    fair_share: Standing
    priority: int
    waited_s: float
    size: float
    decided_by: str | None = None


def factors(capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running[Id]],
            waiting: Sequence[Waiting[Id]], order: Iterable[Id], now: float, policy: Policy, *,
            served: Mapping[str, float], usage: Mapping[str, float] | None = None) -> dict[Id, Factors]:
    """The parts of each job in `order` (the shown order, the admitted first), each against the job
    just ahead of it there. `usage`: each team's decayed use, as the scheduler was given it."""
    ledger = Ledger(capacity, shares, running, usage)
    stopping_for = {r.stopping_for: 1 for r in running if r.stopping and r.stopping_for is not None}
    scene, rules = Scene(ledger, stopping_for, now, policy), tiers_of(policy)
    by_id = {w.job_id: w for w in waiting}
    keys = {team: ledger.fair_key(team) for team in {w.team for w in waiting}}
    standings = _standings(ledger, keys, served)
    out: dict[Id, Factors] = {}
    ahead: Waiting[Id] | None = None
    tiers: dict[JobId, str] = {}
    # Jobs of one team and demand are alike in size (and in quota: Scene's memo): asked once a kind
    # (10,000 waiting jobs are a few kinds).
    sizes: dict[tuple, float] = {}
    for job_id in order:
        job = by_id.get(job_id)
        if job is None:
            continue
        kind = (job.team, tuple(job.demand.items()))
        part = sizes.get(kind)
        if part is None:
            part = sizes[kind] = size(ledger.capacity, job.demand)
        tiers[job_id] = tier_of(job, scene, rules).name
        decided = None if ahead is None else _decided(ahead, job, tiers, keys, served, rules)
        out[job_id] = Factors(tiers[job_id], standings[job.team], job.priority, max(0.0, now - job.queued_at), part,
                              decided)
        ahead = job
    return out


def _standings(ledger: Ledger, keys: Mapping[str, tuple], served: Mapping[str, float]) -> dict[str, Standing]:
    def order(team: str) -> tuple:
        return (*keys[team], served.get(team, -math.inf))
    out = {}
    for team, key in keys.items():
        rank = 1 + sum(1 for other in keys if order(other) < order(team))
        borrowed, held, jobs = key[0], key[1], key[-1]
        past = ledger.past.get(team, 0.0) if ledger.past else None
        out[team] = Standing(rank, borrowed, held, jobs, ledger.share(team).weight, past)
    return out


def size(capacity: Resources, demand: Resources) -> float:
    """The largest part of an arbitrated resource the demand asks (0 where nothing is arbitrated)."""
    return max((n / capacity[r] for r, n in demand.items() if n and capacity.get(r, 0) > 0), default=0.0)


def _decided(ahead: Waiting, job: Waiting, tiers: Mapping[JobId, str], keys: Mapping[str, tuple],
             served: Mapping[str, float], rules: tuple[Tier, ...]) -> str:
    """The part that puts `ahead` before `job` as things stand now; "forecast" where they would put
    `job` first (the play starts `ahead` first all the same)."""
    names = [t.name for t in rules]
    a, j = names.index(tiers[ahead.job_id]), names.index(tiers[job.job_id])
    if a != j:
        return "tier" if a < j else "forecast"
    older = (ahead.queued_at, str(ahead.job_id)) <= (job.queued_at, str(job.job_id))
    if rules[j].by_age:                                 # oldest first, whatever the team
        return "age" if older else "forecast"
    if ahead.team == job.team:
        if ahead.priority != job.priority:
            return "priority" if ahead.priority > job.priority else "forecast"
        return "age" if older else "forecast"
    if keys[ahead.team] != keys[job.team]:
        return "fair_share" if keys[ahead.team] < keys[job.team] else "forecast"
    turn_a, turn_j = served.get(ahead.team, -math.inf), served.get(job.team, -math.inf)
    if turn_a != turn_j:
        return "turn" if turn_a < turn_j else "forecast"
    return "age" if older else "forecast"
