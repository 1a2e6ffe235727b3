"""Where each waiting job will start, by playing the plan forward: the pure scheduler, pass after
pass, each running job ending at its expected time (what jobs of its template took before, else
its time limit), until every waiting job has started or the play's bounds are reached. A job's
place is its place in that predicted start order, and its likely start the time the play starts
it: the order a member reads is the order the controller would follow if nothing new arrived
(issue 49; the standings of one pass change every time a job ends).

Nothing is invented here: every pass is schedule() itself, so a rule (fair order, slots, quotas,
reclaim, priority, starvation) is written once. What the play assumes: no new job arrives; a job
runs its expected duration (unknown: it ends at its time limit, or never); a job preempted stops
within the grace period and comes back to the queue with its first attempt's age."""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from service.scheduling.model import Decision, Id, JobId, Policy, Queued, Resources, Running, Share, Waiting
from service.scheduling.scheduler import schedule, with_place

_AFTER_TICK = 1e-6     # seconds into its pass a launch comes, in the play (what counts: after the tick)


@dataclass
class Forecast:
    order: list[JobId] = field(default_factory=list)       # the predicted start order
    likely: dict[JobId, float] = field(default_factory=dict)  # when each starts, as played


def play_forward(capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running],
                 waiting: Sequence[Waiting], now: float, policy: Policy, *,
                 served: Mapping[str, float], latest: bool = False, deadline: float | None = None,
                 usage: Mapping[str, float] | None = None) -> Forecast:
    """Each running job ends at its `likely_end` (else its `expected_end`, its time limit); each
    waiting job runs its `duration` (None: for ever, in the play). latest: every job to its time
    limit instead (`expected_end`, `limit`): the start at the latest, quotas kept. The controller
    sees an end at its next pass (every policy.pass_s from now), so ends between two passes free
    their capacity together and a start comes at a pass. Bounded by the policy's forecast_passes,
    forecast_jobs and forecast_seconds (of this thread's CPU): a place beyond them is the
    current pass's. `deadline`: this thread's CPU time to stop at (default: forecast_seconds from now)."""
    if deadline is None:
        deadline = time.thread_time() + policy.forecast_seconds
    out = Forecast()
    # A launch comes during a pass, after its tick: a job started at t ends just after t + its run
    # time, and the controller sees that end at the next pass. Without it, a job whose run is a
    # whole number of passes was seen ended on the very tick it ended, a pass early, so the play's
    # chains of such jobs ran ahead of the jobs running now (bench/forecast.py measures 0.3-0.4 s
    # from the end that made room to the start).
    launch = _AFTER_TICK if policy.pass_s > 0 else 0.0
    played = [replace(r, expected_end=_played_end(r, now + launch, latest)) for r in running]
    queue: list[Waiting] = list(waiting)
    seen = {w.job_id for w in waiting}
    served = dict(served)
    left: dict[JobId, float | None] = {}
    # A preempted job's next attempt keeps its first attempt's age (capacity/snapshot.py QUEUED_AT):
    # it came back as the youngest of its team and was played last, the controller starts it next.
    age = {w.job_id: w.queued_at for w in waiting}
    t = now
    for _ in range(policy.forecast_passes):
        if not queue or len(out.order) >= policy.forecast_jobs or time.thread_time() > deadline:
            break
        d = schedule(capacity, shares, played, queue, t, policy, explain=False, served=served, usage=usage)
        by_id = {w.job_id: w for w in queue}
        for a in d.admit:
            w = by_id[a.job_id]
            if w.job_id in seen and w.job_id not in out.likely:
                out.order.append(w.job_id)
                out.likely[w.job_id] = t
            runs = w.limit if latest else w.duration
            played.append(Running(w.job_id, w.team, w.priority, w.demand, t,
                                  expected_end=None if runs is None else t + launch + runs))
            served[w.team] = t
        started = {a.job_id for a in d.admit}
        stopping = {p.job_id: p.for_job for p in d.preempt}
        nominated = set(stopping.values())
        queue = [replace(w, nominated=True) if w.job_id in nominated else w for w in queue if w.job_id not in started]
        # A stop takes the grace period at the latest; likely it is seen at the next pass (the sim
        # stops at once, a trainer saves its checkpoint and exits): held for the whole grace period,
        # the victim's capacity stayed taken 30 s in the play and every later start came late.
        soon = t + (policy.grace_s if latest else launch)
        for r in played:
            if r.job_id in stopping:       # what it still had to run, once it runs again
                left[r.job_id] = None if r.expected_end is None else max(0.0, r.expected_end - t)
        played = [replace(r, stopping=True, stopping_for=stopping[r.job_id], expected_end=soon)
                  if r.job_id in stopping else r for r in played]
        nxt, played, back = _next_end(t, played, now, policy.pass_s)
        if nxt is None:
            break                                # nothing known ends: the rest wait for ever here
        t = nxt
        for r in back:                           # a preempted job waits again, with its first age
            queue.append(Waiting(r.job_id, r.team, r.priority, r.demand, age.get(r.job_id, r.started_at),
                                 duration=left.get(r.job_id), limit=left.get(r.job_id)))
    return out


def _played_end(r: Running, stopped: float, latest: bool) -> float | None:
    """When a running job ends in the play: its time limit at the latest, else its likely end; a
    job being stopped (preempted, cancelled) likely by the next pass, at the latest by its grace
    period's end (its expected_end then)."""
    if latest:
        return r.expected_end
    if r.stopping:
        return stopped if r.expected_end is None else min(stopped, r.expected_end)
    return r.expected_end if r.likely_end is None else r.likely_end


def _next_end(t: float, played: list[Running], now: float,
              pass_s: float) -> tuple[float | None, list[Running], list[Running]]:
    """Moves the clock to the pass that sees the next expected end: the running jobs that have
    ended by then are gone (a preempted one comes back to the queue). None when no running job
    has a known end."""
    ends = [r.expected_end for r in played if r.expected_end is not None]
    if not ends:
        return None, played, []
    nxt = min(ends)
    if pass_s > 0 and nxt > t:
        nxt = now + math.ceil((nxt - now) / pass_s) * pass_s
    keep, back = [], []
    for r in played:
        if r.expected_end is not None and r.expected_end <= nxt:
            if r.stopping and r.stopping_for is not None:
                back.append(r)
        else:
            keep.append(r)
    return max(t, nxt) if nxt != -math.inf else t, keep, back


def explained(capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running[Id]],
              waiting: Sequence[Waiting[Id]], now: float, policy: Policy, *,
              served: Mapping[str, float], usage: Mapping[str, float] | None = None) -> Decision[Id]:
    """This pass's decision with every waiting job's place in the predicted start order, its
    likely start (the play's) and its start at the latest (the same play with every job to its
    time limit): what GET /v1/queue, a waiting job's view and the UI show."""
    d = schedule(capacity, shares, running, waiting, now, policy, served=served, usage=usage)
    if not d.queue:
        return d
    # One budget for both plays (TRAINJOBS_QUEUE_FORECAST_SECONDS is per computation): half each.
    half = policy.forecast_seconds / 2
    fc = play_forward(capacity, shares, running, waiting, now, policy, served=served, usage=usage,
                      deadline=time.thread_time() + half)
    worst = play_forward(capacity, shares, running, waiting, now, policy, served=served, usage=usage, latest=True,
                         deadline=time.thread_time() + half)
    by_id = {q.job_id: q for q in d.queue}
    order = [j for j in fc.order if j in by_id]
    placed = set(order)
    order += [q.job_id for q in d.queue if q.job_id not in placed]
    d.queue = [_placed(by_id[j], i, worst.likely.get(j), fc.likely.get(j)) for i, j in enumerate(order)]
    return d


def _placed(q: Queued[Id], ahead: int, latest: float | None, likely: float | None) -> Queued[Id]:
    if likely is not None and latest is not None:
        # The walk to the time limits sets quotas aside; where the play (quotas kept) starts the
        # job later, that is the honest latest.
        latest = max(likely, latest)
    return replace(q, position=ahead + 1, ahead=ahead, why=with_place(q.reason, ahead), estimated_start=latest,
                   likely_start=likely)
