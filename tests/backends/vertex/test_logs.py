"""A vertex job's logs through GET /v1/jobs/{id}/logs: the backend reads Cloud
Logging (the fake `entries:list` on 127.0.0.1) through google-cloud-logging."""
from __future__ import annotations

import json
import time

from tests.fakes.harness import fake_logging, fake_vertex, harness, make_harness  # noqa: F401 - fixtures


def numeric_id(job: dict) -> str:
    return job["backend_ref"].rsplit("/", 1)[1]


def read_all(h, job_id, **params) -> list[dict]:
    """Every line, page by page, following the cursor."""
    lines, since = [], None
    for _ in range(100):
        q = dict(params, **({"since": since} if since else {}))
        r = h.client.get(f"/v1/jobs/{job_id}/logs", params=q)
        assert r.status_code == 200, r.text
        page = r.json()
        lines += page["lines"]
        if not page["lines"]:
            return lines
        assert page["cursor"] == page["lines"][-1]["cursor"]
        since = page["cursor"]
    raise AssertionError("paging did not end")


def test_logs_per_replica_in_pages_without_loss_or_repeats(harness):
    job = harness.submit()
    jid = numeric_id(job)
    t = time.time_ns()
    logs = harness.logs
    logs.add(jid, None, "Waiting for job to be provisioned.", timestamp_ns=t)
    logs.add(jid, "workerpool0-0", "chief: epoch 1", timestamp_ns=t + 1_000)
    logs.add(jid, "workerpool1-0", "worker: epoch 1", timestamp_ns=t + 2_000)
    # Three entries in one instant: a page may end between them.
    for i, replica in enumerate(["workerpool0-0", "workerpool1-0", "workerpool0-0"]):
        logs.add(jid, replica, f"same instant {i}", timestamp_ns=t + 3_000, insert_id=f"same-{i}")
    logs.add(jid, "workerpool0-0", {"message": "structured", "levelname": "ERROR"}, severity="ERROR",
             timestamp_ns=t + 4_000)
    logs.add("999", "workerpool0-0", "another job's line", timestamp_ns=t + 5_000)

    everything = read_all(harness, job["id"], limit=2)
    assert [ln["message"] for ln in everything] == [
        "Waiting for job to be provisioned.", "chief: epoch 1", "worker: epoch 1",
        "same instant 0", "same instant 1", "same instant 2", "structured"]
    assert [ln["replica"] for ln in everything] == [
        "vertex", "workerpool0-0", "workerpool1-0", "workerpool0-0", "workerpool1-0", "workerpool0-0",
        "workerpool0-0"]
    assert everything[-1]["stream"] == "ERROR" and everything[1]["stream"] == "INFO"
    assert len({ln["cursor"] for ln in everything}) == len(everything)

    worker = read_all(harness, job["id"], replica="workerpool1-0", limit=1)
    assert [ln["message"] for ln in worker] == ["worker: epoch 1", "same instant 1"]

    # Every query names the job and the replica by label and carries our own time bound.
    assert logs.filters
    for f in logs.filters:
        assert f.startswith('resource.type="ml_job"')
        assert f'resource.labels.job_id="{jid}"' in f and 'timestamp>="' in f
    assert any('resource.labels.task_name="workerpool1-0"' in f for f in logs.filters)


def test_entries_in_one_microsecond_out_of_insert_id_order_page_exactly_once(harness):
    job = harness.submit()
    jid = numeric_id(job)
    t = (time.time_ns() // 1000) * 1000
    # Ordered by timestamp (nanoseconds) first: insertIds run backwards within the microsecond.
    for i, insert_id in enumerate(["c", "b", "a"]):
        harness.logs.add(jid, "workerpool0-0", f"line {i}", timestamp_ns=t + 100 * (i + 1), insert_id=insert_id)
    harness.logs.add(jid, "workerpool0-0", "after", timestamp_ns=t + 5_000)
    lines = read_all(harness, job["id"], limit=1)
    assert [ln["message"] for ln in lines] == ["line 0", "line 1", "line 2", "after"]


def test_new_lines_after_the_cursor_are_read_on_the_next_call(harness, monkeypatch):
    clock = harness.use_clock(monkeypatch)
    job = harness.submit()
    jid = numeric_id(job)
    harness.logs.add(jid, "workerpool0-0", "first")
    page = harness.client.get(f"/v1/jobs/{job['id']}/logs").json()
    assert [ln["message"] for ln in page["lines"]] == ["first"] and page["done"] is False
    empty = harness.client.get(f"/v1/jobs/{job['id']}/logs", params={"since": page["cursor"]}).json()
    assert empty["lines"] == [] and empty["cursor"] == page["cursor"]
    harness.logs.add(jid, "workerpool0-0", "second")
    clock.advance(1)  # reads from the end of the log go to Google once per follow interval
    more = harness.client.get(f"/v1/jobs/{job['id']}/logs", params={"since": page["cursor"]}).json()
    assert [ln["message"] for ln in more["lines"]] == ["second"]


def test_a_job_not_yet_on_vertex_has_no_logs(make_harness, fake_vertex, fake_logging):
    with make_harness(vertex_retry_deadline_seconds=0.05) as h:
        fake_vertex.fail("create", 503, times=1000)
        job = h.submit()
        assert job["backend_ref"] is None
        page = h.client.get(f"/v1/jobs/{job['id']}/logs").json()
        assert page["lines"] == [] and page["cursor"] is None
        assert fake_logging.calls["list"] == 0


def test_a_cursor_that_is_not_ours_is_a_422(harness):
    import base64
    import json

    def forged(raw) -> str:
        return "cl1." + base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")

    job = harness.submit()
    for since in ("not-a-cursor", forged({"t": 5, "i": "x"}), forged(["t"]),
                  forged({"t": "2026-01-01T00:00:00", "i": "x"}), "cl1.//79"):
        r = harness.client.get(f"/v1/jobs/{job['id']}/logs", params={"since": since})
        assert r.status_code == 422, (since, r.text)
        assert "since" in [e["field"] for e in r.json()["errors"]]


def test_cloud_logging_503_is_retried(harness):
    job = harness.submit()
    harness.logs.add(numeric_id(job), "workerpool0-0", "hello")
    harness.logs.fail(503)
    r = harness.client.get(f"/v1/jobs/{job['id']}/logs")
    assert r.status_code == 200, r.text
    assert [ln["message"] for ln in r.json()["lines"]] == ["hello"]
    assert harness.logs.calls["list"] == 2


def test_cloud_logging_403_is_an_error_not_an_empty_page(harness):
    job = harness.submit()
    harness.logs.fail(403, "Permission 'logging.logEntries.list' denied", times=1)
    r = harness.client.get(f"/v1/jobs/{job['id']}/logs")
    assert r.status_code == 502, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "Permission 'logging.logEntries.list' denied" in r.json()["detail"]
    assert harness.logs.calls["list"] == 1  # not retried


def sse_events(lines):
    """(event, data) pairs from an SSE line iterator."""
    event, data = None, []
    for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and event:
            yield event, json.loads("\n".join(data))
            event, data = None, []


def test_follow_streams_new_lines_and_ends_when_the_job_ends(harness):
    job = harness.submit()
    jid = numeric_id(job)
    harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    harness.reconcile()
    harness.logs.add(jid, "workerpool0-0", "epoch 1")
    seen, end = [], None
    with harness.client.stream("GET", f"/v1/jobs/{job['id']}/logs", params={"follow": "true"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for event, data in sse_events(r.iter_lines()):
            if event == "log":
                seen.append(data["message"])
                if data["message"] == "epoch 1":
                    # While the stream is open: more output, then Vertex ends the job.
                    harness.logs.add(jid, "workerpool1-0", "epoch 2")
                    harness.logs.add(jid, "workerpool0-0", "saved model")
                    harness.fake.set_state(job["id"], "JOB_STATE_SUCCEEDED")
                    harness.reconcile()
            elif event == "end":
                end = data
                break
    assert seen == ["epoch 1", "epoch 2", "saved model"]
    assert end["state"] == "SUCCEEDED"


def test_follow_of_an_ended_job_sends_every_line_then_end(harness):
    job = harness.submit()
    jid = numeric_id(job)
    for i in range(5):
        harness.logs.add(jid, f"workerpool{i % 2}-0", f"line {i}")
    harness.fake.set_state(job["id"], "JOB_STATE_FAILED", error=(3, "exit status 1"))
    harness.reconcile()
    with harness.client.stream("GET", f"/v1/jobs/{job['id']}/logs",
                               params={"follow": "true", "limit": 2, "replica": "workerpool0-0"}) as r:
        events = list(sse_events(r.iter_lines()))
    assert [d["message"] for e, d in events if e == "log"] == ["line 0", "line 2", "line 4"]
    assert events[-1][0] == "end"
    assert events[-1][1]["state"] == "FAILED" and events[-1][1]["error"]["message"] == "exit status 1"
