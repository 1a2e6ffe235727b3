"""A submitted job's placement wish (issue 52.2, docs/queue.md "Cheapest or soonest"): its
`placement` resolved once, at submit, into what the controller orders its backends by
(service/scheduling/preference.py): the preference, the deadline as a time, and the job's price
per hour on each backend it accepts.

A backend's price: the operator's price per resource-hour (TRAINJOBS_PLACEMENT_PRICES) times
what the job asks there (its demand: cores, vCPUs, GPUs; a resource not priced adds nothing);
else, for a backend that runs the job on Vertex AI, Vertex's list price of the job (the cost
module's estimate, when complete); else none ("no price": after the priced ones)."""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from service.capacity.placement import Placed
from service.core.errors import Problem
from service.cost.estimate import Pricer
from service.jobspec import CompiledJob
from service.lifecycle.protocol import Backend
from service.scheduling.model import SLOT


def resolve(compiled: CompiledJob, placed: tuple[tuple[str, Placed], ...], backends: Mapping[str, Backend],
            prices: Mapping[str, Mapping[str, float]], pricer: Pricer, now: datetime,
            max_start_by_seconds: int) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The job row's `wish` (None: a job of one backend, or one that wishes nothing beyond the
    listed order), or the problems with its `placement`."""
    wish = compiled.placement
    if not wish or len(placed) < 2:
        return None, []
    prefer, raw = wish.get("prefer") or "listed", wish.get("start_by")
    start_by: float | None = None
    if raw is not None:
        start_by = now.timestamp() + raw if isinstance(raw, int) else datetime.fromisoformat(raw).timestamp()
        if start_by <= now.timestamp():
            return None, [Problem("placement.start_by", f"{raw} is in the past (now {now.isoformat()})",
                                  "give a later time, or seconds from the submit")]
        if start_by - now.timestamp() > max_start_by_seconds:
            return None, [Problem("placement.start_by", f"{raw} is more than {max_start_by_seconds} s from now",
                                  "give a time within TRAINJOBS_PLACEMENT_MAX_START_BY_SECONDS of the submit, "
                                  "or none")]
    if prefer == "listed" and start_by is None:
        return None, []
    per_hour = {name: price_of(compiled, p, backends[name], prices.get(name), pricer) for name, p in placed}
    return {"prefer": prefer, "start_by": start_by, "prices": per_hour}, []


def price_of(compiled: CompiledJob, placed: Placed, backend: Backend, prices: Mapping[str, float] | None,
             pricer: Pricer) -> float | None:
    """The job's price per hour on one backend (None: not priced)."""
    if prices is not None:
        return round(sum(n * prices.get(res, 0.0) for res, n in (placed.demand or {}).items() if res != SLOT), 6)
    if backend.capabilities.runs_on is None:   # Vertex AI itself: its list prices
        est = pricer.estimate(compiled.custom_job_dict, "vertex")
        return float(est.per_hour) if est.complete else None
    return None
