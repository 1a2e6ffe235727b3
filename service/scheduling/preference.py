"""A job's wish among the backends it accepts (issue 52.2, docs/queue.md "Cheapest or soonest"):
its accepted backends in the order it would rather run on them, and why, in words. Pure.

`listed` keeps the template's order; `cheapest` orders by the job's price per hour on each
backend (what it asks there times the operator's price per resource-hour, or Vertex AI's list
price); `soonest` by each backend's estimated start for the job. Ties, and backends without a
price or an estimate (after those with one), keep the listed order. A `start_by` deadline then
puts the backends whose estimate misses it after those that meet it (a backend without an
estimate in between: it may meet it), so a job that would miss it on its preferred backend
takes the next that can meet it. The order is what `across` takes as the job's preference: the
job still starts on the first of them that admits it in a pass."""
from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from service.scheduling.across import Side
from service.scheduling.forecast import play_forward
from service.scheduling.model import Id, Policy

PREFERENCES = ("listed", "cheapest", "soonest")


@dataclass(frozen=True)
class Wish:
    """What the job asked for. `start_by`: epoch seconds, or None. `prices`: the job's price per
    hour on each backend (None or absent: no price there)."""

    prefer: str = "listed"
    start_by: float | None = None
    prices: Mapping[str, float | None] = field(default_factory=dict)


def order(listed: Sequence[str], wish: Wish, starts: Mapping[str, float | None], now: float) -> tuple[tuple[str, ...], str]:
    """`listed`: the backends the job accepts, the template's order. `starts`: each backend's
    estimated start for the job (epoch seconds; None or absent: not known). Returns the order and
    why ("" for the listed order with no deadline: nothing to say beyond the placement's words)."""
    rank = {name: i for i, name in enumerate(listed)}
    if wish.prefer == "cheapest":
        names = sorted(listed, key=lambda n: (_missing(wish.prices.get(n)), wish.prices.get(n) or 0.0, rank[n]))
        why = "cheapest: " + ", ".join(f"{n} {_price(wish.prices.get(n))}" for n in names)
    elif wish.prefer == "soonest":
        names = sorted(listed, key=lambda n: (_missing(starts.get(n)), starts.get(n) or 0.0, rank[n]))
        why = "soonest: " + ", ".join(f"{n} {_start(starts.get(n), now)}" for n in names)
    else:
        names, why = list(listed), ""
    if wish.start_by is None:
        return tuple(names), why
    meets = {n: _meets(starts.get(n), wish.start_by, now) for n in names}
    # Stable: within each group the wish's order holds.
    names.sort(key=lambda n: {True: 0, None: 1, False: 2}[meets[n]])
    missed = [n for n in names if meets[n] is False]
    deadline = f"start by {_clock(wish.start_by)}" + (f": missed on {', '.join(missed)}" if missed else "")
    return tuple(names), f"{why}; {deadline}" if why else deadline


def _missing(value: float | None) -> bool:
    return value is None


def _meets(start: float | None, deadline: float, now: float) -> bool | None:
    """None: not known (no estimate, the deadline still ahead)."""
    if start is None:
        return None if deadline > now else False
    return start <= deadline


def _price(value: float | None) -> str:
    return "no price" if value is None else f"{value:.2f}/h"


def _start(start: float | None, now: float) -> str:
    if start is None:
        return "start not known"
    wait = start - now
    if wait <= 0:
        return "now"
    return f"in {round(wait / 60)} min" if wait >= 60 else f"in {round(wait)} s"


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def starts_now(sides: Sequence[Side[Id]], job: Id, now: float) -> dict[str, float | None]:
    """Each backend's estimated start for the job where the pass knows no better: now where what it
    asks there is free now, else not known."""
    out: dict[str, float | None] = {}
    for side in sides:
        demand = next((w.demand for w in side.waiting if w.job_id == job), None)
        if demand is None:
            continue
        held: dict[str, int] = {}
        for r in side.running:
            for res, n in r.demand.items():
                held[res] = held.get(res, 0) + n
        fits = all(n <= side.capacity[res] - held.get(res, 0) for res, n in demand.items() if res in side.capacity)
        out[side.name] = now if fits else None
    return out


def may_start_on(names: Sequence[str], wish: Wish, starts: Mapping[str, float | None], now: float) -> tuple[str, ...]:
    """Of the job's backends in its wish's order (`order`), those it may start on this pass. With a
    start_by deadline and any wish but `soonest`, it waits for the first of them, if that one's
    estimate meets the deadline, rather than start on another now: a `cheapest` job starts on its
    cheapest backend that will have room in time, not on a dearer one that has room first. Else
    (no deadline, an estimate that misses it or none): any of them, the first that admits it."""
    if wish.start_by is None or wish.prefer == "soonest" or not names:
        return tuple(names)
    return (names[0],) if _meets(starts.get(names[0]), wish.start_by, now) else tuple(names)


def forecast_starts(sides: Sequence[Side[Id]], jobs: Collection[Id], now: float, policy: Policy, *,
                    usage: Mapping[str, float] | None = None) -> dict[Id, dict[str, float]]:
    """Each job's likely start on each backend it waits on, as the queue's forecast plays each
    backend forward (scheduling/forecast.py; the sides' waiting jobs with their likely durations).
    One play per backend, TRAINJOBS_QUEUE_FORECAST_SECONDS shared between them; a job the play did
    not place there has no estimate there."""
    out: dict[Id, dict[str, float]] = {job: {} for job in jobs}
    share = policy.forecast_seconds / max(len(sides), 1)
    for side in sides:
        if not any(w.job_id in out for w in side.waiting):
            continue
        fc = play_forward(side.capacity, side.shares, side.running, side.waiting, now, policy, served=side.served,
                          usage=usage, deadline=time.thread_time() + share)
        for job, starts in out.items():
            if job in fc.likely:
                starts[side.name] = fc.likely[job]
    return out
