"""The planner's snapshot reads a running job's time limit (for start estimates) from the
database, one field, not each running job's whole compiled CustomJob: 3,000 running Vertex
jobs were ~30 MB of JSON decoded on every admission pass (issue 39)."""
from __future__ import annotations

import copy
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update

from service.capacity import snapshot
from service.core.clock import utcnow
from service.persistence.models import Job
from tests.capacity.test_planner import _alpha, _jobs


@pytest.mark.parametrize("timeout,seconds", [("600s", 600.0), ("1.5s", 1.5), (None, None), ("soon", None),
                                             ("0s", None)])
def test_a_running_jobs_time_limit_comes_from_its_compiled_job(client, demo, session_factory, timeout, seconds):
    job_id = uuid.UUID(_jobs(client, _alpha(client), 1)[0])
    started = utcnow() - timedelta(seconds=10)
    with session_factory() as s:
        compiled = copy.deepcopy(s.get(Job, job_id).compiled)
        scheduling = compiled["custom_job"]["jobSpec"].setdefault("scheduling", {})
        scheduling.pop("timeout", None)
        if timeout is not None:
            scheduling["timeout"] = timeout
        s.execute(update(Job).where(Job.id == job_id).values(
            compiled=compiled, state="RUNNING", backend_ref="ref-1", started_at=started, demand={"core": 1}))
        s.commit()
    with session_factory() as s:
        snap = snapshot.load(s, "local", {}, max_waiting=100, max_preemptions_per_job=3, grace_seconds=30)
    [running] = snap.running
    expected = None if seconds is None else started.timestamp() + seconds
    assert running.expected_end == (None if expected is None else pytest.approx(expected))
