"""One pass over several backends, for jobs that accept more than one (docs/queue.md, "Placement
across backends"). Pure, as the rest of the package: each backend's inputs in, each backend's
decision out.

A job that accepts several backends waits in each one's queue. Each backend is decided by the
one-backend pass (`schedule`); a job admitted on several is placed on the most preferred of
them, a job admitted on none but preempted for on several on the most preferred of those, and it
is taken out of the other backends' queues for this pass, whose decisions are made again without
it (another job may take what it would have held). Repeated until no job is placed on two: each
round takes at least one job out of one backend's queue, so it ends. A job admitted on a less
preferred backend only (the preferred is full) starts there: the first that frees."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic

from service.scheduling.model import SLOT, Decision, Id, Policy, Resources, Running, Share, Waiting
from service.scheduling.scheduler import schedule


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
    the backend it was placed on this pass and why there, in words ("sim1: 0 of 4 core free; sim2:
    admitted, 2 of 4 core free")."""

    decisions: dict[str, Decision[Id]]
    placed: dict[Id, str]
    why: dict[Id, str]


def across(sides: Sequence[Side[Id]], accepts: Mapping[Id, Sequence[str]], now: float, policy: Policy = Policy(), *,
           usage: Mapping[str, float] | None = None) -> Across[Id]:
    """`accepts`: each job that accepts several backends, most preferred first (a job not named
    waits on one backend only). Backends named there but not among `sides` are left out."""
    by_name = {s.name: s for s in sides}
    out: dict[str, set[Id]] = {s.name: set() for s in sides}
    decisions = {s.name: _decide(s, out[s.name], now, policy, usage) for s in sides}
    while True:
        placed = _placed(decisions, accepts)
        taken = [(name, job) for job, chosen in placed.items() for name in accepts[job]
                 if name != chosen and name in by_name and job not in out[name]
                 and any(w.job_id == job for w in by_name[name].waiting)]
        if not taken:
            break
        for name, job in taken:
            out[name].add(job)
        for name in {n for n, _ in taken}:
            decisions[name] = _decide(by_name[name], out[name], now, policy, usage)
    return Across(decisions, placed, {job: _why(job, placed.get(job), accepts[job], by_name, decisions)
                                      for job in accepts})


def _decide(side: Side[Id], out: set[Id], now: float, policy: Policy,
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


def free_text(side: Side[Id], job: Id) -> str:
    """What the job asks of the backend beside what is free there now ("0 of 64 vcpu free")."""
    demand = next((w.demand for w in side.waiting if w.job_id == job), None)
    if demand is None:
        return "not waiting here"
    held: dict[str, int] = {}
    for r in side.running:
        for res, n in r.demand.items():
            held[res] = held.get(res, 0) + n
    parts = [f"{max(side.capacity.get(res, 0) - held.get(res, 0), 0)} of {side.capacity.get(res, 0)} "
             f"{'launch slots' if res == SLOT else res} free" for res in sorted(demand) if res in side.capacity]
    return ", ".join(parts) or "no capacity limit"


def _why(job: Id, chosen: str | None, names: Sequence[str], sides: Mapping[str, Side[Id]],
         decisions: Mapping[str, Decision[Id]]) -> str:
    words = []
    for name in names:
        if name not in sides:
            words.append(f"{name}: not enabled")
            continue
        state = free_text(sides[name], job)
        if name == chosen:
            started = any(a.job_id == job for a in decisions[name].admit)
            words.append(f"{name}: {'admitted' if started else 'preempting for it'}, {state}")
        else:
            words.append(f"{name}: {state}")
    return "; ".join(words)
