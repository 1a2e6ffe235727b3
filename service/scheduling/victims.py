"""Which running jobs to stop so that a waiting job can start, if any may be stopped for it.

Two reasons allow it (Kueue's reclaimWithinCohort and withinClusterQueue):
- reclaim: the waiting job's team stays inside its nominal quota with the job started, and
  other teams use capacity beyond theirs. Their borrowed jobs may go, whatever their priority.
- priority: the waiting job's class may preempt; jobs of a lower priority may go: borrowed
  jobs of other teams, and its own team's jobs, once they have run their minimum runtime
  (Running.min_runtime_s, else the policy's: time to reach a first checkpoint). A reclaim does
  not wait for it: a team's nominal quota is a guarantee, and the borrower knew it borrowed.
Never a job inside its team's nominal quota for another team's sake, nor, for priority, one
preempted as often as the policy allows (the lifecycle says so: Running.preemptible). A borrowed
job stays reclaimable whatever happened to it before: the cap must not be a way to keep borrowed
capacity (a job with no time limit would keep it for ever). Candidates in order:
other teams' borrowed jobs first, then lowest priority, then least work lost (the time since
its latest checkpoint, else since its start), then youngest. As few as needed: taken in that
order until the job fits, then each one put back if the job still fits without it."""
from __future__ import annotations

from collections.abc import Iterable

from service.scheduling.ledger import Ledger
from service.scheduling.model import Id, PreemptionKind, Running, Waiting


def choose_victims(ledger: Ledger, job: Waiting[Id], running: Iterable[Running[Id]], borrowed: set[Id],
                   taken: set[Id], budget: int, now: float,
                   min_runtime_s: float) -> list[tuple[Running[Id], PreemptionKind]] | None:
    """The jobs to preempt for `job` (each with why), or None when none may or it would not fit."""
    reclaim = ledger.within_nominal(job.team, job.demand)
    if budget <= 0 or not (reclaim or job.may_preempt):
        return None                            # the common case, decided without a look at the running jobs
    short = ledger.short(job.team, job.demand)
    others: list[tuple[Running[Id], PreemptionKind]] = []
    own: list[tuple[Running[Id], PreemptionKind]] = []
    for v in running:
        if v.stopping or v.job_id in taken or not any(v.demand.get(r, 0) for r in short):
            continue
        lower = job.may_preempt and v.priority < job.priority and v.preemptible and _ran_long_enough(v, now, min_runtime_s)
        if v.team == job.team:
            if lower:
                own.append((v, PreemptionKind.PRIORITY))
        elif v.job_id in borrowed and (reclaim or lower):
            others.append((v, PreemptionKind.RECLAIM if reclaim else PreemptionKind.PRIORITY))
    cheapest = _cheapest_first(now)
    order = sorted(others, key=cheapest) + sorted(own, key=cheapest)
    chosen = _take_until_it_fits(ledger, job, order)
    if chosen is None:
        return None
    chosen = _put_back_what_is_not_needed(ledger, job, chosen)
    for v, _ in chosen:                        # they hold their capacity until they have stopped
        ledger.add(v.team, v.demand)
    return chosen if len(chosen) <= budget else None


def _ran_long_enough(v: Running, now: float, min_runtime_s: float) -> bool:
    return now - v.started_at >= (v.min_runtime_s if v.min_runtime_s is not None else min_runtime_s)


def _cheapest_first(now: float):
    def key(candidate: tuple[Running, PreemptionKind]) -> tuple:
        v = candidate[0]
        return v.priority, v.work_since_checkpoint(now), -v.started_at, str(v.job_id)
    return key


def _take_until_it_fits(ledger: Ledger, job: Waiting, order: list) -> list | None:
    chosen = []
    for v, kind in order:
        ledger.remove(v.team, v.demand)
        chosen.append((v, kind))
        if ledger.fits(job.team, job.demand):
            return chosen
    for v, _ in chosen:
        ledger.add(v.team, v.demand)
    return None


def _put_back_what_is_not_needed(ledger: Ledger, job: Waiting, chosen: list) -> list:
    needed = []
    for v, kind in reversed(chosen):
        ledger.add(v.team, v.demand)
        if ledger.fits(job.team, job.demand):
            continue                           # it may keep running
        ledger.remove(v.team, v.demand)
        needed.append((v, kind))
    needed.reverse()
    return needed
