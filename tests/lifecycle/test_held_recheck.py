"""Issue 51.3: a held team costs nothing until its limit may have freed (service/lifecycle/held.py).
The gate is asked again about a held team only when its unfinished jobs or its limits moved since
its last check, or, for a team with a spending limit (the clock moves it), once the replan period
is out; a team whose limit frees leaves at once."""
from __future__ import annotations

import uuid

from sqlalchemy import select, update

from service.core.clock import utcnow
from service.lifecycle.held import Held
from service.persistence.models import Job, Team
from tests.capacity.test_planner import _alpha, _jobs


def test_a_held_team_is_checked_again_only_when_its_jobs_or_limits_moved_or_the_period_ran_out(
        client, demo, session_factory):
    job = uuid.UUID(_jobs(client, _alpha(client), 1)[0])
    with session_factory() as s:
        team = s.execute(select(Team.id).where(Team.name == "alpha")).scalar_one()
        backend = s.get(Job, job).backend
    asked: list = []
    verdict = ["the team's limit"]

    def check(session, job_id):
        asked.append(job_id)
        return verdict[0]

    held = Held(every=10.0)
    held[team] = "held"

    def recheck(clock: float) -> int:
        before = len(asked)
        with session_factory() as s:
            held.recheck(s, backend, check, clock)
        assert held.checked == len(asked) - before
        return held.checked

    assert recheck(0.0) == 1 and asked == [job]      # new to the memo: checked
    assert recheck(1.0) == 0                          # nothing moved: not asked
    with session_factory() as s:                      # one of its jobs was written (an end, a start...)
        s.execute(update(Job).where(Job.id == job).values(updated_at=utcnow()))
        s.commit()
    assert recheck(2.0) == 1
    assert recheck(3.0) == 0
    r = client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 9, "on_exceed": "queue"})
    assert r.status_code in (200, 201), r.text
    assert recheck(4.0) == 1                          # its limits changed
    assert recheck(30.0) == 0                         # a limit on jobs alone: only its jobs and limits move it
    r = client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 9, "max_monthly_spend": 100.0,
                                                   "on_exceed": "queue"})
    assert r.status_code in (200, 201), r.text
    assert recheck(31.0) == 1
    assert recheck(35.0) == 0
    assert recheck(41.0) == 1                         # the period: a spending window may have rolled over
    verdict[0] = None                                 # the limit freed
    assert recheck(41.5) == 0 and team in held        # ...but nothing moved: seen by the period's end
    assert recheck(51.0) == 1 and team not in held
