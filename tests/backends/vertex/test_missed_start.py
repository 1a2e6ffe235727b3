"""Point 5 of issue 26: a job that started and ended between two polls records RUNNING
(at Vertex's startTime) before its final state: events in order, `job.running` once."""
from __future__ import annotations

import pytest

from service.webhooks import events as webhook_events
from service.webhooks.outbox import Outbox
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


@pytest.fixture
def webhook_types(monkeypatch):
    """The webhook event types the real outbox derives from every state change."""
    seen: list[tuple[str, str]] = []
    original = Outbox.on_change

    def recording(self, session, change):
        for t in webhook_events.types_for(change.from_state, change.to_state):
            seen.append((str(change.job_id), t))
        return original(self, session, change)

    monkeypatch.setattr(Outbox, "on_change", recording)
    return seen


@pytest.mark.parametrize("final, error, from_state", [
    ("JOB_STATE_SUCCEEDED", None, "PENDING"),
    ("JOB_STATE_FAILED", (3, "python exited with 1"), "PENDING"),
    ("JOB_STATE_SUCCEEDED", None, "QUEUED"),
])
def test_a_job_that_ran_between_two_polls_shows_running_first(make_harness, fake_vertex, monkeypatch, webhook_types,
                                                              final, error, from_state):
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        job = h.submit()
        if from_state == "PENDING":
            clock.advance(15)
            h.reconcile()
        assert h.job(job["id"])["state"] == from_state
        fake_vertex.set_state(job["id"], "JOB_STATE_RUNNING")
        clock.advance(3)
        fake_vertex.set_state(job["id"], final, error=error)   # both before the next poll
        clock.advance(15)
        h.reconcile()
        done = h.job(job["id"])
        cj = fake_vertex.get(job["id"])
        assert done["state"] == final.removeprefix("JOB_STATE_")
        assert done["started_at"].startswith(cj["startTime"][:19])
        assert done["ended_at"].startswith(cj["endTime"][:19])
        evs = h.events(job["id"])
        assert [(e["from_state"], e["to_state"]) for e in evs][-2:] == [
            (from_state, "RUNNING"), ("RUNNING", final.removeprefix("JOB_STATE_"))]
        assert cj["startTime"][:19] in evs[-2]["reason"]
        assert evs[-2]["at"] <= evs[-1]["at"]
        for _ in range(2):
            clock.advance(15)
            h.reconcile()
        assert [t for jid, t in webhook_types if jid == job["id"]].count("job.running") == 1
        assert len(h.events(job["id"])) == len(evs)


def test_a_job_that_failed_without_starting_shows_no_running(make_harness, fake_vertex, monkeypatch, webhook_types):
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        job = h.submit()
        fake_vertex.set_state(job["id"], "JOB_STATE_FAILED", error=(8, "no T4 capacity in us-central1"))
        clock.advance(15)
        h.reconcile()
        done = h.job(job["id"])
        assert done["state"] == "FAILED" and done["started_at"] is None
        assert "RUNNING" not in [e["to_state"] for e in h.events(job["id"])]
        assert "job.running" not in [t for jid, t in webhook_types if jid == job["id"]]
