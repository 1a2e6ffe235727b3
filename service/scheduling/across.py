"""One pass over several backends, for jobs that accept more than one (docs/queue.md, "Placement
across backends"). Pure, as the rest of the package: each backend's inputs in, each backend's
decision out.

A job that accepts several backends waits in each one's queue. Each backend is decided by the
one-backend pass (`schedule`); a job admitted on several is placed on the most preferred of
them, a job admitted on none but preempted for on several on the most preferred of those, and it
is taken out of the other backends' queues for this pass, whose decisions are made again without
it (another job may take what it would have held). Repeated until the placements settle: a job
whose place was lost meanwhile (its backend decided otherwise once others were taken out) is back
in every queue it accepts; after MAX_ROUNDS, each job keeps its one backend's start or preemption
and the others' are dropped, so a job is never started on two. A job admitted on a less preferred
backend only (the preferred is full) starts there: the first that frees."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic

from service.scheduling.model import SLOT, Decision, Id, Policy, Resources, Running, Share, Waiting
from service.scheduling.scheduler import schedule

# The most rounds of a pass: a job taken out of a backend's queue changes that backend's decision,
# which may move another job; rounds go on until nothing moves (a few in practice), at most this.
MAX_ROUNDS = 16


@dataclass(frozen=True)
class Side(Generic[Id]):
    """One backend's inputs to the pass (as `schedule` takes them)."""

    name: str
    capacity: Resources
    shares: Mapping[str, Share]
    running: Sequence[Running[Id]]
    waiting: Sequence[Waiting[Id]]
    served: Mapping[str, float] = field(default_factory=dict)


@dataclass
class Across(Generic[Id]):
    """Each backend's decision (a job in at most one's admit), and for each job of several backends
    placed this pass (admitted, or preempted for) the backend and why there, in words ("sim1: 0 of
    4 core free; sim2: admitted, 2 of 4 core free")."""

    decisions: dict[str, Decision[Id]]
    placed: dict[Id, str]
    why: dict[Id, str]


def across(sides: Sequence[Side[Id]], accepts: Mapping[Id, Sequence[str]], now: float, policy: Policy = Policy(), *,
           usage: Mapping[str, float] | None = None) -> Across[Id]:
    """`accepts`: each job that accepts several backends, most preferred first (a job not named
    waits on one backend only). Backends named there but not among `sides` are left out."""
    by_name = {s.name: s for s in sides}
    waits = {s.name: {w.job_id for w in s.waiting} for s in sides}
    out: dict[str, frozenset[Id]] = {s.name: frozenset() for s in sides}
    decisions = {s.name: _decide(s, out[s.name], now, policy, usage) for s in sides}
    for _ in range(MAX_ROUNDS):
        placed = _placed(decisions, accepts)
        # Out of each backend's queue: the jobs placed on another this round (not those of earlier
        # rounds: a job that lost its place, another's decision having changed, is back everywhere).
        new = {name: frozenset(job for job, chosen in placed.items() if chosen != name and job in waits[name])
               for name in by_name}
        if new == out:
            break
        for name in [n for n in by_name if new[n] != out[n]]:
            decisions[name] = _decide(by_name[name], new[name], now, policy, usage)
        out = new
    placed = _placed(decisions, accepts)
    # Settled, this changes nothing; else (MAX_ROUNDS went by) a job stays on its one backend.
    decisions = {name: _only_placed(d, name, placed) for name, d in decisions.items()}
    free = {s.name: _free(s) for s in sides}
    demands = {s.name: {w.job_id: w.demand for w in s.waiting if w.job_id in placed} for s in sides}
    return Across(decisions, placed, {job: _why(job, chosen, accepts[job], free, demands, decisions)
                                      for job, chosen in placed.items()})


def _only_placed(decision: Decision[Id], name: str, placed: Mapping[Id, str]) -> Decision[Id]:
    """The backend's decision without the starts and preemptions for jobs placed on another."""
    return Decision(admit=[a for a in decision.admit if placed.get(a.job_id, name) == name],
                    preempt=[p for p in decision.preempt if placed.get(p.for_job, name) == name], queue=decision.queue)


def _decide(side: Side[Id], out: frozenset[Id], now: float, policy: Policy,
            usage: Mapping[str, float] | None) -> Decision[Id]:
    waiting = [w for w in side.waiting if w.job_id not in out]
    return schedule(side.capacity, side.shares, side.running, waiting, now, policy, explain=False,
                    served=side.served, usage=usage)


def _placed(decisions: Mapping[str, Decision[Id]], accepts: Mapping[Id, Sequence[str]]) -> dict[Id, str]:
    admitted = {name: {a.job_id for a in d.admit} for name, d in decisions.items()}
    preempting = {name: {p.for_job for p in d.preempt} for name, d in decisions.items()}
    placed: dict[Id, str] = {}
    for job, names in accepts.items():
        known = [n for n in names if n in decisions]
        chosen = next((n for n in known if job in admitted[n]), None) or \
            next((n for n in known if job in preempting[n]), None)
        if chosen is not None:
            placed[job] = chosen
    return placed


def _free(side: Side[Id]) -> dict[str, tuple[int, int]]:
    """Each resource's (free, capacity) on the backend before the pass."""
    held: dict[str, int] = {}
    for r in side.running:
        for res, n in r.demand.items():
            held[res] = held.get(res, 0) + n
    return {res: (max(total - held.get(res, 0), 0), total) for res, total in side.capacity.items()}


def free_text(free: Mapping[str, tuple[int, int]], demand: Mapping[str, int] | None) -> str:
    """What the job asks of the backend beside what is free there ("0 of 64 vcpu free")."""
    if demand is None:
        return "not waiting here"
    parts = [f"{free[res][0]} of {free[res][1]} {'launch slots' if res == SLOT else res} free"
             for res in sorted(demand) if res in free]
    return ", ".join(parts) or "no capacity limit"


def _why(job: Id, chosen: str, names: Sequence[str], free: Mapping[str, Mapping[str, tuple[int, int]]],
         demands: Mapping[str, Mapping[Id, Resources]], decisions: Mapping[str, Decision[Id]]) -> str:
    words = []
    for name in names:
        if name not in free:
            words.append(f"{name}: not enabled")
            continue
        state = free_text(free[name], demands[name].get(job))
        if name == chosen:
            started = any(a.job_id == job for a in decisions[name].admit)
            words.append(f"{name}: {'admitted' if started else 'preempting for it'}, {state}")
        else:
            words.append(f"{name}: {state}")
    return "; ".join(words)
