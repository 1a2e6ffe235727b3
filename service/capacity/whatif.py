"""What if the capacity and the shares were otherwise (`trainjobs queue simulate`, docs/queue.md):
the last days of one backend's jobs replayed (whatif_replay.py) twice through the controller's own
scheduler and Policy, under today's capacity and shares and under a proposal in the operator API's
own JSON, beside what really happened: each team's p50 and p90 wait from submit to first start.

The replay "as it is" is there so that the proposal is compared like with like: the replay leaves
things out (docs/queue.md), and what it leaves out differs from the real history the same way for
both."""
from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.capacity import snapshot, whatif_history
from service.capacity.planner import Planner
from service.capacity.schemas import CapacityIn, ShareIn, TeamName
from service.capacity.settings import CapacitySettings
from service.capacity.whatif_replay import TooLong, World, replay
from service.core.errors import Invalid, Problem
from service.core.schema_base import RequestBody
from service.persistence.models import Team
from service.scheduling.model import Share


class Proposal(RequestBody):
    """The file: the bodies of PUT /v1/capacity/{backend} and PUT /v1/teams/{team}/shares/{backend}."""
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [
        {"capacity": {"resources": {"core": 16}}, "shares": {"vision": {"nominal": {"core": 8}, "weight": 2},
                                                             "speech": None}}]})
    capacity: CapacityIn | None = Field(None, description="The backend's capacity, as PUT /v1/capacity/{backend} "
                                                          "takes it; absent: today's")
    shares: dict[TeamName, ShareIn | None] = Field(default_factory=dict, description=(
        "Team -> its share, as PUT /v1/teams/{team}/shares/{backend} takes it, or null for none (as DELETE); "
        "a team not named keeps today's"))


@dataclass(frozen=True)
class Limits:
    max_days: int        # TRAINJOBS_SIMULATE_MAX_DAYS
    max_jobs: int        # TRAINJOBS_SIMULATE_MAX_JOBS
    max_seconds: float   # TRAINJOBS_SIMULATE_MAX_SECONDS (CPU)


@dataclass(frozen=True)
class Waits:
    """Waits from submit to first start, in seconds (nearest rank); not_started: jobs the replay
    never started (they wait for ever under it: more than the capacity or the team may ever hold)."""
    p50_s: float | None
    p90_s: float | None
    not_started: int = 0


@dataclass(frozen=True)
class TeamWaits:
    team: str
    jobs: int
    happened: Waits
    today: Waits
    proposed: Waits


@dataclass(frozen=True)
class Report:
    backend: str
    since: datetime
    until: datetime
    jobs: int
    never_started: int          # left out: no attempt of theirs ever ran
    still_running: int          # replayed with their run time so far
    today: World
    proposed: World
    teams: list[TeamWaits]
    cpu_seconds: float


def parse(text: str | bytes) -> Proposal:
    """The proposal, or Invalid naming every problem as the API's 422 does."""
    try:
        return Proposal.model_validate_json(text)
    except ValidationError as e:
        raise Invalid.of([_problem(err) for err in e.errors()]) from None


def _problem(err) -> Problem:
    where = ".".join(str(p) for p in err.get("loc", ())) or "body"
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return Problem(where, "unknown field", "remove it")
    if kind == "json_invalid":
        return Problem("body", f"invalid JSON: {err.get('msg', '')}", "send a valid JSON document")
    if kind == "missing":
        return Problem(where, "required", "provide it")
    return Problem(where, err.get("msg", "invalid"))


def propose(today: World, proposal: Proposal, teams: Iterable[str], max_resources: int) -> World:
    """Today's world with the proposal applied, checked as the operator API checks each change, but
    whole: the nominal quotas against the proposed capacity."""
    capacity = dict(proposal.capacity.resources) if proposal.capacity is not None else dict(today.capacity)
    shares = dict(today.shares)
    for team, share in proposal.shares.items():
        if share is None:
            shares.pop(team, None)
        else:
            shares[team] = Share(dict(share.nominal), dict(share.borrowing_limit), dict(share.lending_limit),
                                 share.weight)
    problems = _problems(capacity, proposal, set(teams), max_resources)
    problems += _over_capacity(capacity, shares)
    if problems:
        raise Invalid.of(problems)
    return World(capacity, shares, today.slots)


def _problems(capacity: Mapping[str, int], proposal: Proposal, teams: set[str], most: int) -> list[Problem]:
    counted = [("capacity.resources", capacity)] + [
        (f"shares.{team}.{f}", getattr(s, f)) for team, s in proposal.shares.items() if s is not None
        for f in ("nominal", "borrowing_limit", "lending_limit")]
    out = [Problem(where, f"{len(counts)} resources; at most {most} (TRAINJOBS_CAPACITY_MAX_RESOURCES)",
                   "name only the resources that are shared") for where, counts in counted if len(counts) > most]
    out += [Problem(f"shares.{team}", f"no team {team!r}", "name a team that exists")
            for team in proposal.shares if team not in teams]
    return out + [Problem(f"shares.{team}.lending_limit.{r}", f"lends {n}, more than its nominal quota of "
                          f"{s.nominal.get(r, 0)}", "lend at most the nominal quota")
                  for team, s in proposal.shares.items() if s is not None
                  for r, n in s.lending_limit.items() if n > s.nominal.get(r, 0)]


def _over_capacity(capacity: Mapping[str, int], shares: Mapping[str, Share]) -> list[Problem]:
    total: dict[str, int] = {}
    for share in shares.values():
        for r, n in share.nominal.items():
            total[r] = total.get(r, 0) + n
    return [Problem("shares", f"the teams' nominal quotas of {r} add up to {n}, more than the capacity's {capacity[r]}"
                    f" (by {n - capacity[r]})", "lower a team's nominal quota or raise the capacity")
            for r, n in sorted(total.items()) if r in capacity and n > capacity[r]]


def load(session: Session, backend: str, days: int, until: datetime, settings: CapacitySettings, limits: Limits,
         slots: int | None) -> tuple[World, whatif_history.History, list[str]]:
    """Today's world, the window's jobs and the team names, bounded before anything is read."""
    if not 1 <= days <= limits.max_days:
        raise Invalid.of([Problem("days", f"{days}; from 1 to {limits.max_days} (TRAINJOBS_SIMULATE_MAX_DAYS)",
                                  "replay fewer days")])
    since = until - timedelta(days=days)
    rows = whatif_history.count(session, backend, since, until)
    if rows > limits.max_jobs:
        raise Invalid.of([Problem("days", f"{rows} jobs on {backend} in the last {days} days; at most "
                                  f"{limits.max_jobs} (TRAINJOBS_SIMULATE_MAX_JOBS)",
                                  "replay fewer days, or raise TRAINJOBS_SIMULATE_MAX_JOBS")])
    capacity, _ = snapshot.capacity_of(session, backend, settings.defaults)
    today = World(capacity, snapshot.shares_of(session, backend), slots)
    teams = list(session.scalars(select(Team.name)))
    return today, whatif_history.read(session, backend, since, until), teams


def compare(backend: str, history: whatif_history.History, today: World, proposed: World, since: datetime,
            until: datetime, settings: CapacitySettings, limits: Limits) -> Report:
    """Both replays within one CPU budget (this thread's), each team's waits side by side."""
    policy = Planner(settings).policy          # the controller's, from the same settings
    started = time.thread_time()
    deadline = started + limits.max_seconds
    runs = []
    for world in (today, proposed):
        try:
            runs.append(replay(history.jobs, world, policy, max_preemptions_per_job=settings.max_preemptions_per_job,
                               deadline=deadline))
        except TooLong as e:
            done = max(0.0, e.reached - since.timestamp()) / 86_400
            raise Invalid.of([Problem("days", f"the replay used its {limits.max_seconds:g} CPU seconds "
                                      f"(TRAINJOBS_SIMULATE_MAX_SECONDS) {done:.1f} days into the "
                                      f"{(until - since).days} of the {'proposal' if runs else 'replay as it is'}",
                                      "replay fewer days, or raise TRAINJOBS_SIMULATE_MAX_SECONDS")]) from None
    return Report(backend, since, until, len(history.jobs), history.never_started, history.still_running, today,
                  proposed, _by_team(history, runs[0], runs[1]), time.thread_time() - started)


def _by_team(history: whatif_history.History, today: Mapping, proposed: Mapping) -> list[TeamWaits]:
    teams: dict[str, list] = {}
    for job in history.jobs:
        teams.setdefault(job.team, []).append(job)
    return [TeamWaits(team, len(jobs), _waits([history.waited[j.job_id] for j in jobs]), _replayed(jobs, today),
                      _replayed(jobs, proposed)) for team, jobs in sorted(teams.items())]


def _replayed(jobs: list, firsts: Mapping) -> Waits:
    return _waits([firsts[j.job_id] - j.submitted for j in jobs if j.job_id in firsts],
                  sum(j.job_id not in firsts for j in jobs))


def _waits(values: list[float], not_started: int = 0) -> Waits:
    return Waits(percentile(values, 50), percentile(values, 90), not_started)


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile: the smallest value that at least p% of the values do not exceed."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

