"""The outbox: a delivery row is written in the transaction of the job change, so none is
recorded for a change that rolls back, and none is lost when the controller dies before
(or while) sending: the next controller sends it. On SQLite and PostgreSQL."""
from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import func, select

from service.lifecycle.engine import Deposed
from service.lifecycle.protocol import Observation
from service.lifecycle.states import JobState
from service.persistence.models import Job, WebhookDelivery
from service.webhooks.dispatcher import Dispatcher
from tests.servekit import Serve
from tests.waiting import wait_for
from tests.webhooks.conftest import (
    LOOPBACK,
    QUICK,
    add_template,
    hook_settings,
    subscribe,
    wait_delivery,
)


def _deliveries(session) -> list[str]:
    return list(session.scalars(select(WebhookDelivery.event_type).order_by(WebhookDelivery.event_type)))


def test_no_delivery_for_a_state_change_that_rolls_back(make_client, session_factory, receiver):
    # No controller: jobs wait QUEUED and nothing is sent while the test looks at the rows.
    client = make_client(run_reconciler=False, local_max_running_jobs=0)
    add_template(client, QUICK)
    subscribe(client, receiver.url, event_types=["job.state_changed", "job.cancelled"])
    job_id = uuid.UUID(client.post("/v1/jobs", json={"template": "quick"}).json()["id"])
    lifecycle = client.app.state.lifecycle
    with session_factory() as s:
        assert _deliveries(s) == ["job.state_changed"]          # its creation, with the job
        lifecycle.move(s, job_id, JobState.CANCELLED, reason="test", actor="tests")
        assert _deliveries(s) == ["job.cancelled", "job.state_changed", "job.state_changed"]
        s.rollback()
    with session_factory() as s:
        assert s.scalar(select(Job.state).where(Job.id == job_id)) == "QUEUED"
        assert _deliveries(s) == ["job.state_changed"]          # the rolled-back change left nothing
        lifecycle.move(s, job_id, JobState.CANCELLED, reason="test", actor="tests")
        s.commit()
    with session_factory() as s:
        assert _deliveries(s) == ["job.cancelled", "job.state_changed", "job.state_changed"]
    # A progress-only report is no event.
    with session_factory() as s:
        assert lifecycle.apply(s, Observation(job_id, progress={"epoch": 1, "epochs": 2})) is False
        s.commit()
        assert s.scalar(select(Job.progress).where(Job.id == job_id))["epoch"] == 1
        assert s.scalar(select(func.count()).select_from(WebhookDelivery)) == 3
    assert receiver.nothing_more()


def test_a_controller_that_never_sent_leaves_the_event_to_the_next(api_client, db_url, work_dir, tokens, receiver):
    """The event was recorded (with the job) while a controller held the lock and died without
    a pass; the next controller, a later epoch, sends it."""
    settings = hook_settings(db_url, work_dir, run_reconciler=False, local_max_running_jobs=0)
    with api_client(settings, tokens["admin"]) as client:
        add_template(client, QUICK)
        hook = subscribe(client, receiver.url, event_types=["job.created"])
        first = client.app.state.controller
        first._promote(first.leadership.try_acquire(), threads=False)   # controls: epoch N
        job = client.post("/v1/jobs", json={"template": "quick"}).json()
        epoch = first.epoch
        first.leadership.release()                                    # ... and dies before any pass
    with api_client(settings, tokens["admin"]) as client:
        assert receiver.nothing_more()
        client.app.state.controller.run_once()                        # the next controller: epoch N+1
        assert client.app.state.controller.epoch == epoch + 1
        got = receiver.next("the event recorded under the dead controller")
        assert got.verify(hook["secret"])["data"]["job"]["id"] == job["id"]
        delivery, = wait_delivery(client, hook["id"])
        assert delivery["attempts"] == 1


def test_a_controller_killed_while_sending_leaves_it_to_the_next(db_url, tmp_path, receiver):
    """Two real `trainjobs serve` processes; the controller is kill -9'd while the receiver
    holds its request open (it never learnt the answer, nor recorded the attempt). The other
    process takes over and sends the same message (same webhook-id) again."""
    env = {"TRAINJOBS_DATABASE_URL": db_url, "TRAINJOBS_LOCAL_WORK_DIR": str(tmp_path / "runs"),
           "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "0", "TRAINJOBS_ELECTION_INTERVAL_SECONDS": "0.5",
           "TRAINJOBS_WEBHOOK_ALLOWED_NETWORKS": json.dumps(LOOPBACK),
           "TRAINJOBS_WEBHOOK_DISPATCH_INTERVAL_SECONDS": "0.1", "TRAINJOBS_WEBHOOK_RETRY_JITTER": "0"}
    first = Serve(tmp_path / "a", env, name="a").ready()
    services = [first]
    try:
        wait_for(first.is_controller, "the first process to control")
        second = Serve(tmp_path / "b", env, name="b").ready()
        services.append(second)
        api = second.client
        assert api.post("/v1/templates", json=QUICK).status_code == 201
        r = api.post("/v1/webhooks", json={"url": receiver.url, "event_types": ["job.created"]})
        assert r.status_code == 201, r.text
        hook = r.json()
        receiver.holding = True
        job = api.post("/v1/jobs", json={"template": "quick"}).json()
        held = receiver.held.get(timeout=60)          # the first controller is sending it
        assert held.verify(hook["secret"])["data"]["job"]["id"] == job["id"]
        receiver.holding = False
        first.kill9()
        got = receiver.next("the delivery by the new controller")
        assert got.headers["webhook-id"] == held.headers["webhook-id"]
        assert got.verify(hook["secret"])["data"]["job"]["id"] == job["id"]
        assert second.is_controller()
        log = wait_for(lambda: (items := api.get(f"/v1/webhooks/{hook['id']}/deliveries").json()["items"])
                       and items[0]["status"] == "delivered" and items, "the delivery recorded")
        assert [(d["status"], d["attempts"]) for d in log] == [("delivered", 1)]
    finally:
        receiver.hold.set()
        for s in services:
            s.stop()


def test_a_deposed_controller_sends_nothing(make_client, receiver):
    client = make_client(run_reconciler=False)
    hook = subscribe(client, receiver.url)
    client.post(f"/v1/webhooks/{hook['id']}/test")
    state = client.app.state
    controller = state.controller
    controller._promote(controller.leadership.try_acquire(), threads=False)
    stale = Dispatcher(state.session_factory, state.lifecycle, state.webhook_limits, fence=controller.epoch - 1)
    with pytest.raises(Deposed):
        stale.run_once()
    assert receiver.nothing_more()
    controller.run_once()   # the current epoch's dispatcher does send it
    assert receiver.next("the delivery").verify(hook["secret"])["type"] == "webhook.test"
    controller.leadership.release()


def test_a_webhook_made_by_another_process_gets_the_very_next_job_created(make_client, session_factory, receiver):
    # The submit path reads "does this team have a webhook?" in its template query and skips
    # the outbox's own query when not: that answer must never be remembered across submits.
    here = make_client(run_reconciler=False, local_max_running_jobs=0)
    there = make_client(run_reconciler=False, local_max_running_jobs=0)
    add_template(here, QUICK)
    before = here.post("/v1/jobs", json={"template": "quick"}).json()
    hook = subscribe(there, receiver.url, event_types=["job.created"])
    after = here.post("/v1/jobs", json={"template": "quick"}).json()
    with session_factory() as s:
        rows = s.execute(select(WebhookDelivery.event_type, WebhookDelivery.job_id)).all()
    assert [(t, str(j)) for t, j in rows] == [("job.created", after["id"])]
    assert before["id"] != after["id"]
    # Paused: nothing recorded, as before this change.
    assert there.post(f"/v1/webhooks/{hook['id']}/pause").status_code == 200
    here.post("/v1/jobs", json={"template": "quick"})
    with session_factory() as s:
        assert s.scalar(select(func.count()).select_from(WebhookDelivery)) == 1
