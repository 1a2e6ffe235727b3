"""What the queue's forecast reads (issue 49.2): a job's likely run time is the median of its
team's recent successful runs of the same template on the backend, else its time limit; a
running job's likely end is its start plus that, never past its time limit."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from service.capacity.planner import Planner
from service.capacity.settings import CapacitySettings
from service.core.clock import utcnow
from service.persistence.models import Job
from tests.capacity.test_planner import _alpha, _id, _jobs


def test_likely_run_times_come_from_the_templates_recent_runs(client, session_factory, demo):
    done = _jobs(client, _alpha(client), 3)
    running, waiting = _jobs(client, _alpha(client), 2)
    now = utcnow()
    with session_factory() as s:
        for job_id, minutes in zip(done, (10, 30, 20), strict=True):
            s.execute(update(Job).where(Job.id == _id(job_id)).values(
                state="SUCCEEDED", backend_ref="r", started_at=now - timedelta(hours=1),
                ended_at=now - timedelta(hours=1) + timedelta(minutes=minutes)))
        s.execute(update(Job).where(Job.id == _id(running)).values(
            state="RUNNING", backend_ref="r", started_at=now - timedelta(minutes=5)))
        s.commit()
        planner = Planner(CapacitySettings())
        snap = planner.snapshot(s, "local", forecast=True, slots=1)      # the running job holds the one slot
        bare = planner.snapshot(s, "local")
    [w] = snap.waiting
    assert w.duration == 20 * 60                                  # the median of 10, 30 and 20 minutes
    [r] = snap.running
    assert r.likely_end == (now - timedelta(minutes=5)).timestamp() + 20 * 60
    # The controller's pass reads none of it.
    assert bare.waiting[0].duration is None and bare.running[0].likely_end is None
    d = planner.decide(snap, now)
    [q] = d.queue
    # It starts at the controller's first pass after the running one ends (passes 1 to 2 intervals apart).
    assert q.job_id == _id(waiting) and r.likely_end <= q.likely_start <= r.likely_end + 2 * planner.policy.pass_s
