"""What a submit learns from the shared-capacity settings, before the job is stored: its
priority (from its priority class, which its team must be allowed to use), what it holds while
it runs (its backend's demand), and whether it could ever run at all (a job asking more than
the whole capacity, or more than its team may ever use, is refused now rather than waiting for
ever)."""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.capacity import snapshot
from service.capacity.cache import TtlCache
from service.capacity.settings import CapacitySettings
from service.core.errors import Forbidden, Invalid, Problem
from service.jobspec import CompiledJob
from service.lifecycle.protocol import Backend, SharesCapacity
from service.persistence.models import PriorityClass
from service.scheduling.explain import amount
from service.scheduling.ledger import over_borrowing_limit, over_capacity


@dataclass(frozen=True)
class Placed:
    demand: dict[str, int] = field(default_factory=dict)
    priority_class: str | None = None
    priority: int = 0
    may_preempt: bool = False

    def columns(self) -> dict:
        return {"demand": self.demand or None, "priority_class": self.priority_class, "priority": self.priority,
                "may_preempt": self.may_preempt}


class Placement:
    def __init__(self, settings: CapacitySettings, cache: TtlCache) -> None:
        self.settings = settings
        self.cache = cache

    def _classes(self, session: Session) -> dict[str, tuple[int, bool, list | None]]:
        return self.cache.get("classes", lambda: {
            r.name: (r.value, r.preempts, r.teams) for r in session.execute(
                select(PriorityClass.name, PriorityClass.value, PriorityClass.preempts, PriorityClass.teams))})

    def _capacity(self, session: Session, backend: str) -> dict[str, int]:
        return self.cache.get(("capacity", backend),
                              lambda: snapshot.capacity_of(session, backend, self.settings.defaults)[0])

    def _shares(self, session: Session, backend: str):
        return self.cache.get(("shares", backend), lambda: snapshot.shares_of(session, backend))

    def place(self, session: Session, backend_name: str, backend: Backend, compiled: CompiledJob, team: str) -> Placed:
        priority, preempts = 0, False
        name = compiled.priority_class
        if name is not None:
            classes = self._classes(session)
            if name not in classes:
                raise Invalid.of([Problem("priority_class", f"no priority class named {name!r}",
                                          f"use one of: {', '.join(sorted(classes)) or 'none is defined'} "
                                          "(GET /v1/priority-classes)")])
            priority, preempts, teams = classes[name]
            if teams is not None and team not in teams:
                raise Forbidden(f"team {team} may not use priority class {name!r}; it is for team(s) "
                                f"{', '.join(teams) or 'none'}: ask an operator, or use another class")
        # The SharesCapacity role's demand(), where the backend plays it (a declared role, checked).
        demand = backend.demand(compiled) if isinstance(backend, SharesCapacity) else {}
        capacity = self._capacity(session, backend_name)
        asked = snapshot.arbitrated(demand, capacity)
        # The scheduler's own rules for a job that could never start (service/scheduling/ledger.py),
        # asked with nothing running: what a pass would leave waiting for ever is refused now.
        problems = [Problem("backend", f"the job asks {amount(asked[r], r)}; backend {backend_name} has {most} in all",
                            f"ask for fewer (replicas, machine type, accelerators), or an operator raises the capacity "
                            f"(PUT /v1/capacity/{backend_name})")
                    for r, most in sorted(over_capacity(capacity, asked).items())]
        share = self._shares(session, backend_name).get(team)
        if share is not None and not problems:
            problems = [Problem("backend", f"the job asks {amount(asked[r], r)}; team {team} may use at most {most} on "
                                f"backend {backend_name} (nominal quota + borrowing limit)",
                                "ask for fewer, or an operator raises the team's share "
                                f"(PUT /v1/teams/{team}/shares/{backend_name})")
                        for r, most in sorted(over_borrowing_limit(share, asked).items())]
        if problems:
            raise Invalid.of(problems)
        return Placed(demand=dict(demand), priority_class=name, priority=priority, may_preempt=preempts)

