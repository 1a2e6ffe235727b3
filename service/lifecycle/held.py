"""Teams the admission gate holds (their own limits: budgets): the plan leaves their waiting jobs
out, so they take no capacity from other teams and cost nothing a pass but one check of each
held team's oldest waiting job (2,000 held jobs used to cost a read, an UPDATE and a commit each,
every pass: 0.33 s -> 6.2 s).

And that check only when the team's verdict may have changed (issue 51.3: 20 held teams' checks,
about five reads each, were a third of a planning pass): its unfinished jobs on any backend
(how many, the sum of their `updated_at`: a job that ends, starts or is cancelled, a new one)
or its limits row moved since its last check. Those decide a limit on jobs or accelerators; a
spending limit also moves with the clock (a month ends, its running jobs cost more), so a team
with one is asked at least every `every` seconds too (the loop's replan period: seen this much
later at most, as quiet.py's plans see what changes with the clock alone)."""
from __future__ import annotations

import math
import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.core.clock import utcnow
from service.lifecycle import admission
from service.lifecycle.quiet import ACTIVE_STATES, epoch_sum
from service.persistence.models import Job, TeamLimits


class Held(dict):
    """Team id -> why its oldest waiting job waits."""

    def __init__(self, every: float) -> None:
        super().__init__()
        self.every = every
        self._marks: dict[uuid.UUID, tuple] = {}   # each team's mark at its last check
        self._all_at = -math.inf                    # when every held team was last checked (monotonic)
        self.checked = 0                            # gate checks made by the last recheck (tests)

    def recheck(self, session: Session, backend: str, check, clock: float) -> None:
        """Asks the gate again about each held team whose mark moved (or that has a spending limit,
        once the period is out): a team whose limit has freed leaves, and is planned again on this pass."""
        marks = _marks(session, list(self))
        timely = clock - self._all_at >= self.every
        self.checked = 0
        for team_id in list(self):
            mark = marks.get(team_id, ())
            if not (timely and mark and mark[-1]) and mark == self._marks.get(team_id):
                continue
            self.checked += 1
            oldest = session.execute(select(Job.id).where(Job.team_id == team_id, Job.backend == backend,
                                                          admission.UNLAUNCHED, admission.due(utcnow()))
                                     .order_by(Job.created_at, Job.id).limit(1)).scalar()
            if oldest is None or check(session, oldest) is None:
                del self[team_id]
        self._marks = {team_id: marks.get(team_id, ()) for team_id in self}
        if timely:
            self._all_at = clock
        session.rollback()      # the gate's check may lock its team's limits: none is kept


def _marks(session: Session, teams: list) -> dict[uuid.UUID, tuple]:
    """Each team's unfinished jobs (count, sum of updated_at), its limits' updated_at and whether
    they limit its spending (last): two reads for all."""
    jobs = {team_id: (n, at) for team_id, n, at in session.execute(
        select(Job.team_id, func.count(), epoch_sum(session, Job.updated_at))
        .where(Job.team_id.in_(teams), Job.state.in_(ACTIVE_STATES)).group_by(Job.team_id))}
    limits = {team_id: (at, spend is not None) for team_id, at, spend in session.execute(
        select(TeamLimits.team_id, TeamLimits.updated_at, TeamLimits.max_monthly_spend_micros)
        .where(TeamLimits.team_id.in_(teams)))}
    return {team_id: (jobs.get(team_id), *limits.get(team_id, (None, False))) for team_id in teams}
