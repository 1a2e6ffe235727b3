"""The controller's launch check for team limits (a lifecycle.admission.AdmissionGate).

A QUEUED job launches only while its team stays within its limits counting the jobs
already launched; otherwise it waits, its waiting_reason naming the limit, and is looked
at again on every pass, so it launches as soon as use drops. Within one pass a team's
younger jobs wait behind its older held-back one (no small job overtakes a big one of the
same team); other teams' jobs are not held up."""
from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.budgets import rules
from service.budgets.service import demand_of_row
from service.budgets.usage import lock_limits, team_use
from service.persistence.models import Team, utcnow


class BudgetGate:
    def __init__(self, currency: str) -> None:
        self.currency = currency

    def start_pass(self) -> PassCheck:
        return PassCheck(self.currency)


class PassCheck:
    """One pass's check (the lifecycle's AdmissionGate: check(session, job_id) -> why it waits),
    and `free(team_id)`: whether a job of the team passes without a read, its team having no
    limits when this pass first looked. The controller then asks nothing for it, and records
    its launch attempt with the others' (bench/README.md, issue 51.2: two reads a launched job
    were 11% of a pass). A team's limits set during the pass apply from the next one: a pass
    is seconds, and a check made just before the limits' commit let the job in all the same."""

    def __init__(self, currency: str) -> None:
        self.currency = currency
        self.held: dict[uuid.UUID, str] = {}   # team -> why its oldest waiting job waits
        self.unlimited: set[uuid.UUID] = set()

    def free(self, team_id: uuid.UUID) -> bool:
        return team_id in self.unlimited

    def __call__(self, session: Session, job_id: uuid.UUID) -> str | None:
        team_id, job = demand_of_row(session, job_id)
        if team_id in self.held:
            return f"waiting behind an older job of its team: {self.held[team_id]}"
        limits = lock_limits(session, team_id)
        if limits is None:
            self.unlimited.add(team_id)
            return None
        team = session.execute(select(Team.name).where(Team.id == team_id)).scalar_one()
        crossed = rules.check(limits, team_use(session, team_id, utcnow(), launched_only=True), job, team,
                              self.currency)
        if crossed is None:
            return None
        self.held[team_id] = (f"team limit {crossed.limit}: {crossed.message}; it launches as soon as the team's use "
                              "drops")
        return self.held[team_id]
