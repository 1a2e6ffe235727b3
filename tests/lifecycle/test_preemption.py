"""Preemption end to end: the real controller loop, the local backend's real replicas, SQLite and
PostgreSQL. Team alpha borrows the one core; team beta's job arrives inside beta's nominal quota,
so alpha's job gets SIGTERM, saves its step, is recorded preempted (error.cause "preemption", a
job.preempted webhook) and requeued as a new attempt that resumes from that step once the core is
free again, while beta's job runs."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from service.lifecycle.admission import PreemptOrder
from service.lifecycle.engine import Deposed
from service.persistence.models import ControllerLease, Job, WebhookDelivery
from tests.backends.localkit import kill_all
from tests.conftest import bearer
from tests.lifecycle.preemptkit import Service
from tests.waiting import wait_for


@pytest.fixture
def work_dir(tmp_path):
    path = tmp_path / "runs"
    yield path
    kill_all(path)


@pytest.fixture
def service(api_client, db_url, work_dir, tmp_path):
    return lambda **kw: Service(api_client, db_url, work_dir, tmp_path, **kw)


def test_borrowed_job_is_preempted_requeued_and_resumes(service):
    svc = service(webhook_allowed_networks=["127.0.0.1/32"])
    hook = svc.post("alpha", "/v1/webhooks", json={"url": "http://127.0.0.1:9/hook",
                                                   "event_types": ["job.preempted", "job.failed"]})
    a = svc.submit("alpha", "long")
    svc.wait_state(a, "RUNNING")
    wait_for(lambda: (svc.state / "started-0").exists(), "alpha's replica to start")

    b = svc.submit("beta", "quick")
    failed = svc.wait_state(a, "FAILED", "SUCCEEDED", "CANCELLED")
    assert failed["state"] == "FAILED"
    err = failed["error"]
    # Beta's job, not alpha's: alpha's job reads "another team's job" (and why, which names beta),
    # never beta's job id (the row keeps it, for the controller).
    assert err["cause"] == "preemption" and err["for_job"] is None and err["kind"] == "reclaim", err
    assert err["message"].startswith("preempted for another team's job (team beta reclaims") and b not in str(err)
    assert err["backend_error"]["message"] == "CANCELLED: the job was preempted"
    kept = int((svc.state / "sigterm-0").read_text())      # it got SIGTERM and saved its step
    row = svc.row(a)
    assert row.preempt_requested_at is not None and str(row.preempted_for) == b
    assert row.progress["preempted_at"]["step"] == kept
    events = svc.events(a)
    asked = [e for e in events if e.reason.startswith("preemption requested")]
    assert len(asked) == 1 and asked[0].from_state == asked[0].to_state == "RUNNING"
    assert "for another team's job: team beta" in asked[0].reason and b not in asked[0].reason
    assert events[-1].to_state == "FAILED" and events[-1].reason.startswith("preempted for another team's job")

    nxt = svc.next_attempt(a)
    assert nxt.attempt == 2 and nxt.preemptions == 1 and nxt.demand == {"core": 1}
    assert nxt.compiled["output_of"] == a and nxt.not_before is None
    assert svc.wait_state(b, "SUCCEEDED")["state"] == "SUCCEEDED"
    assert svc.row(b).nominated_at is None        # cleared when it launched
    svc.wait_state(nxt.id, "RUNNING")
    started = wait_for(lambda: [p.name for p in svc.state.iterdir() if p.name.startswith("started-")
                                and p.name != "started-0"], "the new attempt's replica to start")
    assert started == [f"started-{kept}"]          # from the step it saved
    resumed = wait_for(lambda: (svc.job(nxt.id).get("progress") or {}).get("resumed_at_step"),
                       "the new attempt's train_start")
    assert resumed == kept
    svc.release.touch()
    assert svc.wait_state(nxt.id, "SUCCEEDED")["state"] == "SUCCEEDED"
    (seen,) = svc.job(nxt.id)["preemptions"]     # the job view, from any attempt
    assert seen["attempt"] == a and seen["for_job"] is None and seen["kind"] == "reclaim" and "team beta" in seen["why"]
    assert seen["kept"] == kept and seen["resumed_at_step"] == kept and seen["at"]

    with svc.services.session_factory() as session:
        types = session.execute(select(WebhookDelivery.event_type).where(
            WebhookDelivery.subscription_id == uuid.UUID(hook["id"]), WebhookDelivery.job_id == uuid.UUID(a))
        ).scalars().all()
    assert list(types) == ["job.preempted"]        # not job.failed: a preemption is not the job's failure


def test_deposed_controller_preemption_writes_nothing(service):
    svc = service()
    a = svc.submit("alpha", "long")
    svc.wait_state(a, "RUNNING")
    engine = svc.services.lifecycle
    with svc.services.session_factory() as session:
        epoch = session.scalar(select(ControllerLease.epoch).where(ControllerLease.name == "controller"))
        before = session.scalar(select(Job.updated_at).where(Job.id == uuid.UUID(a)))
        order = PreemptOrder(uuid.UUID(a), uuid.uuid4(), "reclaim", "team beta is below its nominal quota")
        with pytest.raises(Deposed):
            engine.request_preemption(session, order, fence=epoch - 1)
        session.rollback()
    row = svc.row(a)
    assert row.preempt_requested_at is None and row.preempted_for is None and row.updated_at == before
    assert not [e for e in svc.events(a) if e.reason.startswith("preemption")]
    assert not (svc.state / "sigterm-0").exists()
    svc.release.touch()
    assert svc.wait_state(a, "SUCCEEDED")["state"] == "SUCCEEDED"


def test_member_cancel_during_preemption_wins(service):
    svc = service(holding=True)
    a = svc.submit("alpha", "long")
    svc.wait_state(a, "RUNNING")
    wait_for(lambda: (svc.state / "started-0").exists(), "alpha's replica to start")
    b = svc.submit("beta", "quick")
    # The replica got SIGTERM and is saving (it holds until the test says): the member cancels now.
    wait_for(lambda: (svc.state / "sigterm-0").exists(), "the preemption's SIGTERM")
    r = svc.client.post(f"/v1/jobs/{a}/cancel", headers=bearer(svc.member))
    assert r.status_code == 202, r.text
    svc.hold.touch()
    ended = svc.wait_state(a, "CANCELLED", "FAILED", "SUCCEEDED")
    assert ended["state"] == "CANCELLED", ended["error"]
    with svc.services.session_factory() as session:
        assert session.scalar(select(Job.id).where(Job.retry_of == uuid.UUID(a))) is None   # no new attempt
    assert svc.wait_state(b, "SUCCEEDED")["state"] == "SUCCEEDED"


def test_a_borrowed_job_preempted_as_often_as_allowed_is_still_reclaimed(service):
    """Issue 47.3: the per-job cap bounds priority preemptions; a borrower is always reclaimable,
    or the cap would be a way to keep borrowed capacity (a job with no time limit for ever)."""
    svc = service(max_preemptions_per_job=1)
    a = svc.submit("alpha", "long")
    svc.wait_state(a, "RUNNING")
    wait_for(lambda: (svc.state / "started-0").exists(), "alpha's replica to start")
    b1 = svc.submit("beta", "quick")
    svc.wait_state(a, "FAILED")
    svc.wait_state(b1, "SUCCEEDED")
    again = svc.next_attempt(a)
    svc.wait_state(again.id, "RUNNING")
    b2 = svc.submit("beta", "quick")
    ended = svc.wait_state(again.id, "FAILED")
    assert ended["error"]["cause"] == "preemption" and ended["error"]["kind"] == "reclaim", ended["error"]
    assert svc.wait_state(b2, "SUCCEEDED")["state"] == "SUCCEEDED"
    third = svc.next_attempt(a)                    # attempts point at the first
    assert (third.attempt, third.preemptions) == (3, 2)     # it goes on once the capacity is free again
