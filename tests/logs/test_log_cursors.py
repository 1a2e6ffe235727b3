"""A log cursor (`since`, or Last-Event-ID when following) that this service did not
hand out is a 422, never a silent restart from the first line nor a 500 from a seek
or a timestamp out of range. Local jobs (log files) and Vertex jobs (Cloud Logging
fake), on SQLite and PostgreSQL."""
import base64
import json

import pytest

from service.backends.local.rundir import RunDir
from service.backends.replica_logs import MAX_OFFSET, encode_cursor
from tests.apikit import assert_problem
from tests.fakes.harness import fake_logging, fake_vertex, harness, make_harness  # noqa: F401 - fixtures


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.fixture
def local_job(client, demo, settings):
    """A queued local job whose chief has written two lines."""
    job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
    log = RunDir.of(settings.local_work_dir, job["id"]).logs / "workerpool0-0.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"2026-01-01T00:00:00.000001Z stdout first\n2026-01-01T00:00:00.000002Z stdout second\n")
    return job["id"]


LOCAL_BAD = {
    "not base64": "!!!!",
    "base64 of nothing we wrote": b64("hello"),
    "padding": b64("0-0:1") + "==",
    "negative offset": b64("0-0:-1"),
    "offset past any log": b64(f"0-0:{MAX_OFFSET + 1}"),
    "offset past lseek": b64("0-0:999999999999999999"),
    "nineteen digits": b64("0-0:9223372036854775807"),
    "the same replica twice": b64("0-0:1,0-0:2"),
    "a Vertex cursor": "cl1." + b64('{"t":"2026-01-01T00:00:00Z","i":"x"}'),
    "a key past its length": b64("x" * 65 + ":1"),
}


@pytest.mark.parametrize("why", list(LOCAL_BAD))
def test_bad_local_cursors_are_422(client, local_job, why):
    cursor = LOCAL_BAD[why]
    body = assert_problem(client.get(f"/v1/jobs/{local_job}/logs", params={"since": cursor}), 422, "since")
    assert "unchanged" in body["errors"][0]["fix"]
    r = client.get(f"/v1/jobs/{local_job}/logs", params={"follow": True}, headers={"Last-Event-ID": cursor})
    assert_problem(r, 422, "since")


def test_good_local_cursors_resume(client, local_job):
    page = client.get(f"/v1/jobs/{local_job}/logs").json()
    assert [ln["message"] for ln in page["lines"]] == ["first", "second"]
    first = page["lines"][0]["cursor"]
    rest = client.get(f"/v1/jobs/{local_job}/logs", params={"since": first}).json()
    assert [ln["message"] for ln in rest["lines"]] == ["second"]
    # The largest offset accepted reads nothing, and says so.
    far = client.get(f"/v1/jobs/{local_job}/logs", params={"since": encode_cursor({"workerpool0-0": MAX_OFFSET})})
    assert far.status_code == 200 and far.json()["lines"] == []


def vertex_cursor(t, i="x") -> str:
    return "cl1." + b64(json.dumps({"t": t, "i": i}))


VERTEX_BAD = {
    "not base64": "!!!!",
    "no prefix": b64('{"t":"2026-01-01T00:00:00Z","i":"x"}'),
    "year 0 in UTC": vertex_cursor("0001-01-01T00:00:00+14:00"),
    "year 10000 in UTC": vertex_cursor("9999-12-31T23:59:59-14:00"),
    "before 1970": vertex_cursor("1969-12-31T23:59:59Z"),
    "no time zone": vertex_cursor("2026-01-01T00:00:00"),
    "insert id not a string": vertex_cursor("2026-01-01T00:00:00Z", {"a": 1}),
    "insert id too long": vertex_cursor("2026-01-01T00:00:00Z", "x" * 3000),
    "not an object": "cl1." + b64("[1, 2]"),
    "deep nesting": "cl1." + b64("[" * 2000 + "]" * 2000),
}


@pytest.mark.parametrize("why", list(VERTEX_BAD))
def test_bad_vertex_cursors_are_422(harness, why):
    job = harness.submit()
    r = harness.client.get(f"/v1/jobs/{job['id']}/logs", params={"since": VERTEX_BAD[why]})
    assert_problem(r, 422, "since")


def test_a_vertex_cursor_from_a_page_resumes(harness):
    job = harness.submit()
    jid = job["backend_ref"].rsplit("/", 1)[1]
    harness.logs.add(jid, "workerpool0-0", "one", timestamp_ns=1_800_000_000_000_000_000)
    harness.logs.add(jid, "workerpool0-0", "two", timestamp_ns=1_800_000_000_000_001_000)
    page = harness.client.get(f"/v1/jobs/{job['id']}/logs", params={"limit": 1}).json()
    assert [ln["message"] for ln in page["lines"]] == ["one"]
    rest = harness.client.get(f"/v1/jobs/{job['id']}/logs", params={"since": page["cursor"]}).json()
    assert [ln["message"] for ln in rest["lines"]] == ["two"]
