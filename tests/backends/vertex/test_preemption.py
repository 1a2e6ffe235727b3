"""Point 3 of issue 26 (in part): a Spot preemption and Vertex AI's infrastructure errors
read as what they are in the job's error, events and (through the event's reason)
webhooks; with a retry policy the next attempt is a new CustomJob writing under the
first attempt's output directory, so its replicas' AIP_CHECKPOINT_DIR is the first
attempt's and the trainer resumes from those checkpoints."""
from __future__ import annotations

import pytest

from service.demo import demo_template
from service.webhooks import events as webhook_events
from service.webhooks.outbox import Outbox
from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures

PREEMPTED = "The replica workerpool1-0 was preempted: its Spot VM was reclaimed by Compute Engine."


def _spot_template(client, name: str, retry: dict | None) -> None:
    body = demo_template().model_dump(mode="json", exclude_none=True)
    body["name"] = name
    body["spec"]["scheduling"] = {**(body["spec"].get("scheduling") or {}), "strategy": "SPOT"}
    if retry is not None:
        body["spec"]["retry"] = retry
    r = client.post("/v1/templates", json=body)
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("code, message, cause, note", [
    (14, PREEMPTED, "preemption", "Spot VM preempted"),
    (13, "Internal error occurred for the current attempt.", "infrastructure",
     "Vertex AI infrastructure error INTERNAL"),
    (3, "The replica workerpool0-0 exited with a non-zero status of 1.", None, None),
])
def test_failures_read_as_what_they_are(make_harness, fake_vertex, monkeypatch, code, message, cause, note):
    sent: list[tuple[str, str]] = []   # (webhook event type, the reason its payload carries)
    original = Outbox.on_change

    def recording(self, session, change):
        sent.extend((t, change.reason) for t in webhook_events.types_for(change.from_state, change.to_state))
        return original(self, session, change)

    monkeypatch.setattr(Outbox, "on_change", recording)
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        job = h.submit()
        fake_vertex.set_state(job["id"], "JOB_STATE_RUNNING")
        clock.advance(15)
        h.reconcile()
        fake_vertex.set_state(job["id"], "JOB_STATE_FAILED", error=(code, message))
        clock.advance(15)
        h.reconcile()
        failed = h.job(job["id"])
        assert failed["state"] == "FAILED"
        assert failed["error"].get("cause") == cause and failed["error"]["message"] == message
        reason = h.events(job["id"])[-1]["reason"]
        assert [r for t, r in sent if t == "job.failed"] == [reason]
        if note:
            assert note in reason and "not a failure of the job's code" in reason
        else:
            assert "not a failure of the job's code" not in reason


def test_a_preempted_spot_job_is_retried_from_its_checkpoints(make_harness, fake_vertex, fake_logging, monkeypatch):
    with make_harness(vertex_base_output_directory="gs://bucket/jobs", vertex_progress_interval_seconds=0) as h:
        clock = h.use_clock(monkeypatch)
        _spot_template(h.client, "spot-resume", {"max_attempts": 2, "backoff": {"initial_seconds": 0}})
        first = h.submit(template="spot-resume")
        cj1 = fake_vertex.get(first["id"])
        assert cj1["jobSpec"]["scheduling"]["strategy"] == "SPOT"
        fake_vertex.set_state(first["id"], "JOB_STATE_RUNNING")
        clock.advance(15)
        h.reconcile()
        fake_vertex.set_state(first["id"], "JOB_STATE_FAILED", error=(14, PREEMPTED))
        clock.advance(15)
        h.reconcile()
        failed = h.job(first["id"])
        assert failed["error"]["cause"] == "preemption"
        second_id = failed["retried_by"]
        assert second_id, failed
        note = h.events(first["id"])[-1]["reason"]
        assert "Spot VM preempted" in note and f"retried as job {second_id}" in note
        clock.advance(1)
        h.reconcile()
        second = h.job(second_id)
        assert second["backend_ref"], second
        assert (second["attempt"], second["retry_of"]) == (2, first["id"])
        cj2 = fake_vertex.get(second_id)
        assert cj2["name"] != cj1["name"] and second["backend_ref"] == cj2["name"]
        # The new CustomJob writes where the first did: Vertex sets the same AIP_CHECKPOINT_DIR.
        prefix = f"gs://bucket/jobs/{first['id']}"
        assert cj2["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == prefix
        assert cj1["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == prefix
        for replica in second["cluster"]:
            assert replica["env"]["AIP_CHECKPOINT_DIR"] == f"{prefix}/checkpoints/"
        # The trainer restored epoch 2's checkpoint: its train_start line says it goes on at 3.
        fake_vertex.set_state(second_id, "JOB_STATE_RUNNING")
        clock.advance(15)
        h.reconcile()
        numeric = cj2["name"].rsplit("/", 1)[1]
        fake_logging.add(numeric, "workerpool0-0", {"event": "train_start", "epochs": 5, "initial_epoch": 3,
                                                    "task": "chief:0"})
        clock.advance(15)
        h.reconcile()
        resumed = h.job(second_id)
        assert resumed["state"] == "RUNNING" and resumed["progress"]["resumed_at_epoch"] == 3


def test_a_preemption_is_not_retried_when_signals_are_off(make_harness, fake_vertex, monkeypatch):
    with make_harness() as h:
        clock = h.use_clock(monkeypatch)
        _spot_template(h.client, "spot-no-retry", {"max_attempts": 2, "on_signal": False,
                                                   "backoff": {"initial_seconds": 0}})
        job = h.submit(template="spot-no-retry")
        fake_vertex.set_state(job["id"], "JOB_STATE_FAILED", error=(14, PREEMPTED))
        clock.advance(15)
        h.reconcile()
        failed = h.job(job["id"])
        assert failed["state"] == "FAILED" and failed["retried_by"] is None
        assert "does not retry signals" in h.events(job["id"])[-1]["reason"]
