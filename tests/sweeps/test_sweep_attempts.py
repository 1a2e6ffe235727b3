"""Issue 49.3: a trial goes on in its attempts. A trial whose first attempt was preempted (FAILED,
cause "preemption") and whose next attempt waits or runs is unfinished: the sweep starts no trial
beyond max_parallel for it, counts no failure, does not end, and a cancel of the sweep stops the
attempt that goes on. Through the API and the sweep launcher's passes, on SQLite and PostgreSQL."""
from __future__ import annotations

import uuid

from sqlalchemy import update

from service.core.clock import utcnow
from service.lifecycle import retries
from service.persistence.models import Job
from tests.sweeps.helpers import create, get, template


def _preempt(client, job_id: str) -> str:
    """The first attempt ends as a preemption and its next attempt is queued, as the engine does."""
    services = client.app.state.services
    with services.session_factory() as s:
        first = uuid.UUID(job_id)
        s.execute(update(Job).where(Job.id == first).values(state="FAILED", ended_at=utcnow(),
                                                            error={"cause": "preemption", "kind": "reclaim"}))
        plan = retries.plan_preemption(s, first, utcnow())
        retries.insert_attempt(s, plan, first, services.lifecycle.creation_event(plan.row["id"], "controller",
                                                                                   utcnow()))
        s.commit()
        return str(plan.row["id"])


def test_a_trial_whose_first_attempt_was_preempted_is_still_running(client):
    r = client.post("/v1/templates", json=template(workers=["--exit", "0"]))
    assert r.status_code == 201, r.text
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2]}}, max_parallel=1)
    controller = client.app.state.services.controller
    controller.run_once()
    [trial] = [t for t in get(client, sweep["id"])["trials"] if t["job_id"]]
    again = _preempt(client, trial["job_id"])
    for _ in range(3):
        controller.run_once()
    now = get(client, sweep["id"])
    assert now["state"] == "RUNNING"
    # One trial started (its second attempt waits): none beyond max_parallel, no failure counted.
    assert now["counts"] == {"QUEUED": 1, "WAITING": 1}, now["counts"]
    assert client.post(f"/v1/sweeps/{sweep['id']}/cancel").status_code in (200, 202)
    assert client.get(f"/v1/jobs/{again}").json()["state"] in ("CANCELLING", "CANCELLED")
