"""Where each waiting job will start, by playing the plan forward: the pure scheduler, pass after
pass, each running job ending at its expected time (what jobs of its template took before, else
its time limit), until every waiting job has started or the play's bounds are reached. A job's
place is its place in that predicted start order, and its likely start the time the play starts
it: the order a member reads is the order the controller would follow if nothing new arrived
(issue 49; the standings of one pass change every time a job ends).

Nothing is invented here: every pass is schedule() itself, so a rule (fair order, slots, quotas,
reclaim, priority, starvation) is written once. What the play assumes: no new job arrives; a job
runs its expected duration (unknown: it ends at its time limit, or never); a job preempted stops
by the next pass (at the latest within the grace period) and comes back to the queue with its
first attempt's age. Which ends one controller pass sees is not known (`over_cadences`): the
likely start is the mean over plays of several pass lengths (as long as the controller says its
passes take, Policy.pass_took, from its next pass on: capacity/passes.py), the latest the latest
over them."""
from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from service.scheduling.model import Decision, Id, JobId, Policy, Queued, Resources, Running, Share, Waiting
from service.scheduling.scheduler import schedule, with_place

_AFTER_TICK = 1e-6     # seconds into its pass a launch comes, in the play (what counts: after the tick)
# The controller starts its next pass an interval after its last one ended (lifecycle/loop.py), so
# its passes are the interval plus the pass's own length apart: from nothing to about the interval
# again, as the host's load decides, and each pass its own. Which ends one pass sees decides the
# order (two 1-core ends seen together start a 2-core job first; a team seen holding none of its
# nominal quota takes it back with its oldest job), so one play on the exact interval was right
# or far off by chance: bench/forecast_replay.py, 60 seeds, tau >= 0.9 in 0% (a quiet host,
# passes 0-0.05 s) to 72% of them; the mean over these plays, 87-100%.
_CADENCES = 16         # plays of the likely start, each with its own (seeded) pass lengths
_PASS_LONGEST = 2.0    # the longest pass period played, in intervals


@dataclass
class Forecast:
    order: list[JobId] = field(default_factory=list)       # the predicted start order
    likely: dict[JobId, float] = field(default_factory=dict)  # when each starts, as played


def play_forward(capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running],
                 waiting: Sequence[Waiting], now: float, policy: Policy, *,
                 served: Mapping[str, float], latest: bool = False, deadline: float | None = None,
                 usage: Mapping[str, float] | None = None, cadence: int | None = None) -> Forecast:
    """Each running job ends at its `likely_end` (else its `expected_end`, its time limit); each
    waiting job runs its `duration` (None: for ever, in the play). latest: every job to its time
    limit instead (`expected_end`, `limit`): the start at the latest, quotas kept. The controller
    sees an end at its next pass (every policy.pass_s from now), so ends between two passes free
    their capacity together and a start comes at a pass. Bounded by the policy's forecast_passes,
    forecast_jobs and forecast_seconds (of this thread's CPU): a place beyond them is the
    current pass's. `deadline`: this thread's CPU time to stop at (default: forecast_seconds from now).
    `cadence`: passes 1 to _PASS_LONGEST intervals apart, each drawn from this seed (None: every
    policy.pass_s exactly)."""
    if deadline is None:
        deadline = time.thread_time() + policy.forecast_seconds
    out = Forecast()
    launch, told = _launch(policy, None if latest else cadence)
    played = [replace(r, expected_end=_played_end(r, now + launch, latest)) for r in running]
    queue: list[Waiting] = list(waiting)
    seen = {w.job_id for w in waiting}
    served = dict(served)
    left: dict[JobId, float | None] = {}
    # A preempted job's next attempt keeps its first attempt's age (capacity/snapshot.py QUEUED_AT):
    # it came back as the youngest of its team and was played last, the controller starts it next.
    age = {w.job_id: w.queued_at for w in waiting}
    ticks = _Passes(now, policy, cadence, latest)
    t = ticks.at
    if t > now:                                  # the controller's next pass sees what ended by then
        played, back = _ended_by(t, played)
        queue += [_again(r, age, left) for r in back]
    for _ in range(policy.forecast_passes):
        if not queue or len(out.order) >= policy.forecast_jobs or time.thread_time() > deadline:
            break
        d = schedule(capacity, shares, played, queue, t, policy, explain=False, served=served, usage=usage)
        by_id = {w.job_id: w for w in queue}
        for a in d.admit:
            w = by_id[a.job_id]
            if w.job_id in seen and w.job_id not in out.likely:
                out.order.append(w.job_id)
                out.likely[w.job_id] = t + launch if told else t
            runs = w.limit if latest else w.duration
            played.append(Running(w.job_id, w.team, w.priority, w.demand, t,
                                  expected_end=None if runs is None else t + launch + runs))
            served[w.team] = t
        started = {a.job_id for a in d.admit}
        if told and started:
            ticks.busy(t + launch)
        nominated = {p.for_job for p in d.preempt}
        queue = [replace(w, nominated=True) if w.job_id in nominated else w for w in queue if w.job_id not in started]
        played = _stopping(played, d.preempt, t, t + (policy.grace_s if latest else launch), left)
        nxt, played, back = _next_end(t, played, ticks)
        if nxt is None:
            break                                # nothing known ends: the rest wait for ever here
        t = nxt
        queue += [_again(r, age, left) for r in back]
    return out


def _launch(policy: Policy, cadence: int | None) -> tuple[float, bool]:
    """How long after its pass's tick a launch comes in the play, and whether the controller said.
    A launch comes during a pass, after its tick: a job started at t ends just after t + its run
    time, and the controller sees that end at the next pass. Without it, a job whose run is a
    whole number of passes was seen ended on the very tick it ended, a pass early, so the play's
    chains of such jobs ran ahead of the jobs running now (bench/forecast.py measures 0.3-0.4 s
    from the end that made room to the start). Where the controller said how long a pass that
    launches takes (Policy.launch_took), its launches come at its end (a job's start is then), and
    the next pass the interval after (_Passes.busy); not in the plays of the start at the latest,
    whose passes are drawn up to two intervals long (a launching pass's median length is no bound:
    bench/forecast_replay.py with launching passes of 0.2-0.8 s missed 1.3% of the latest with it)."""
    if cadence is not None and policy.pass_s > 0 and policy.launch_took is not None:
        return max(_AFTER_TICK, policy.launch_took), True
    return (_AFTER_TICK if policy.pass_s > 0 else 0.0), False


def _again(r: Running, age: Mapping[JobId, float], left: Mapping[JobId, float | None]) -> Waiting:
    """A preempted job waits again, with its first attempt's age and what it still had to run."""
    return Waiting(r.job_id, r.team, r.priority, r.demand, age.get(r.job_id, r.started_at),
                   duration=left.get(r.job_id), limit=left.get(r.job_id))


def _stopping(played: list[Running], preempt: Sequence, t: float, soon: float,
              left: dict[JobId, float | None]) -> list[Running]:
    """The jobs a pass at t preempts, stopping by `soon`: at the latest the grace period's end;
    likely the next pass (the sim stops a job at once, a trainer saves its checkpoint and exits).
    Held for the whole grace period, the victim's capacity stayed taken 30 s in the play and every
    later start came late. `left` gets what each still had to run, once it runs again."""
    stopping = {p.job_id: p.for_job for p in preempt}
    for r in played:
        if r.job_id in stopping:
            left[r.job_id] = None if r.expected_end is None else max(0.0, r.expected_end - t)
    return [replace(r, stopping=True, stopping_for=stopping[r.job_id], expected_end=soon)
            if r.job_id in stopping else r for r in played]


def _played_end(r: Running, stopped: float, latest: bool) -> float | None:
    """When a running job ends in the play: its time limit at the latest, else its likely end; a
    job being stopped (preempted, cancelled) likely by the next pass, at the latest by its grace
    period's end (its expected_end then)."""
    if latest:
        return r.expected_end
    if r.stopping:
        return stopped if r.expected_end is None else min(stopped, r.expected_end)
    return r.expected_end if r.likely_end is None else r.likely_end


class _Passes:
    """The controller's passes from `now` on: every pass_s from now (no seed), or (seeded) each pass
    its own length after the one before: pass_s plus a pass's own length as the controller measured
    its recent passes (policy.pass_took), else 1 to _PASS_LONGEST pass_s. The first pass: when the
    controller said its next one starts (policy.next_pass_at), else `now`. Asked for later and later
    times only. `latest`: passes at least as long as the unmeasured ones (the start at the latest).
    A pass that launched (busy) is followed by the next one the interval after it ended."""

    def __init__(self, now: float, policy: Policy, seed: int | None, latest: bool = False) -> None:
        self.now, self.pass_s, self.at = now, policy.pass_s, now
        self.ended: float | None = None      # when the pass at self.at ended, if it launched
        self.rng = random.Random(seed) if seed is not None and policy.pass_s > 0 else None
        took = policy.pass_took if self.rng is not None else None
        if took is None:
            self.low, self.high = policy.pass_s, policy.pass_s * _PASS_LONGEST
        else:
            lo, hi = max(0.0, took[0]), max(took[0], took[1], 0.0)
            self.low, self.high = policy.pass_s + lo, policy.pass_s + (max(hi, policy.pass_s) if latest else hi)
        nxt = policy.next_pass_at
        if self.rng is not None and nxt is not None and nxt >= now - self.high:
            # Known, and not a stale word (a controller that stopped passing says nothing): the pass
            # under way (now, then), or the next one, sees what ended by then.
            self.at = min(max(now, nxt), now + self.high)
        self.now = self.at

    def first_from(self, x: float) -> float:
        """The first pass at or after x."""
        if self.rng is None:
            return self.now + math.ceil((x - self.now) / self.pass_s) * self.pass_s
        if self.ended is not None and self.at < x:
            self.at, self.ended = self.ended + self.pass_s, None
        mean = (self.low + self.high) / 2
        far = int((x - self.at) / mean) - 8      # a job hours ahead: no draw per pass (the phase is lost by then)
        if far > 0:
            self.at += far * mean
        while self.at < x:
            self.at += self.rng.uniform(self.low, self.high)
        return self.at


    def busy(self, ended: float) -> None:
        """The pass at self.at launched jobs and ended then: the next starts the interval after."""
        self.ended = max(self.at, ended)


def _ended_by(t: float, played: list[Running]) -> tuple[list[Running], list[Running]]:
    """The running jobs still running at a pass at t, and the preempted ones that have stopped by
    then (they wait again); the others that ended by then are gone."""
    keep, back = [], []
    for r in played:
        if r.expected_end is not None and r.expected_end <= t:
            if r.stopping and r.stopping_for is not None:
                back.append(r)
        else:
            keep.append(r)
    return keep, back


def _next_end(t: float, played: list[Running], ticks: _Passes) -> tuple[float | None, list[Running], list[Running]]:
    """Moves the clock to the pass that sees the next expected end: the running jobs that have
    ended by then are gone (a preempted one comes back to the queue). None when no running job
    has a known end."""
    ends = [r.expected_end for r in played if r.expected_end is not None]
    if not ends:
        return None, played, []
    nxt = min(ends)
    if ticks.pass_s > 0 and nxt > t:
        nxt = ticks.first_from(nxt)
    keep, back = _ended_by(nxt, played)
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
    # One budget for both (TRAINJOBS_QUEUE_FORECAST_SECONDS is per computation): half each.
    half = policy.forecast_seconds / 2
    fc = over_cadences(capacity, shares, running, waiting, now, policy, served=served, usage=usage,
                       deadline=time.thread_time() + half)
    worst = over_cadences(capacity, shares, running, waiting, now, policy, served=served, usage=usage, latest=True,
                          deadline=time.thread_time() + half)
    by_id = {q.job_id: q for q in d.queue}
    order = [j for j in fc.order if j in by_id]
    placed = set(order)
    order += [q.job_id for q in d.queue if q.job_id not in placed]
    d.queue = [_placed(by_id[j], i, worst.likely.get(j), fc.likely.get(j)) for i, j in enumerate(order)]
    return d


def over_cadences(capacity: Resources, shares: Mapping[str, Share], running: Sequence[Running],
                  waiting: Sequence[Waiting], now: float, policy: Policy, *, served: Mapping[str, float],
                  deadline: float, usage: Mapping[str, float] | None = None, latest: bool = False) -> Forecast:
    """The play with _CADENCES pass lengths (_Passes). Likely: each job at its mean start, in that
    order. latest: each job at its latest start over them (the order is the first play's): which
    ends one pass sees can start a job later than the exact interval's play does. The first play
    may take the whole budget (a long queue: then it alone decides, as one play did before); the
    others share what it leaves, each placing only the jobs it placed, and one that does not
    place them all is set aside (a mean over some plays only would put a job beyond their reach
    before one they reach)."""
    first = play_forward(capacity, shares, running, waiting, now, policy, served=served, usage=usage,
                         deadline=deadline, latest=latest, cadence=0 if policy.pass_s > 0 else None)
    if policy.pass_s <= 0 or not first.order:
        return first                            # no passes: every play is the same
    rest = replace(policy, forecast_jobs=len(first.order))
    plays = [first]
    for seed in range(1, _CADENCES):
        left = deadline - time.thread_time()
        if left <= 0:
            break
        fc = play_forward(capacity, shares, running, waiting, now, rest, served=served, usage=usage, latest=latest,
                          deadline=time.thread_time() + left / (_CADENCES - seed), cadence=seed)
        if len(fc.order) == len(first.order):
            plays.append(fc)
    if latest:
        return Forecast(first.order, {j: max(p.likely[j] for p in plays) for j in first.order})
    mean = {j: sum(p.likely[j] for p in plays) / len(plays) for j in first.order}
    place = {j: i for i, j in enumerate(first.order)}
    return Forecast(sorted(first.order, key=lambda j: (mean[j], place[j])), mean)


def _placed(q: Queued[Id], ahead: int, latest: float | None, likely: float | None) -> Queued[Id]:
    if likely is not None and latest is not None:
        # The walk to the time limits sets quotas aside; where the play (quotas kept) starts the
        # job later, that is the honest latest.
        latest = max(likely, latest)
    return replace(q, position=ahead + 1, ahead=ahead, why=with_place(q.reason, ahead), estimated_start=latest,
                   likely_start=likely)
