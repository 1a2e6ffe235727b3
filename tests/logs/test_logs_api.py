"""GET /v1/jobs/{id}/logs as JSON pages: cursors, replica filter, errors, access."""
from __future__ import annotations

import pytest

from tests.backends.localkit import spec
from tests.conftest import bearer, make_token

CHIEF_LINES, WORKER_LINES, WORKER_ERRORS = 30, 20, 5
TOTAL = 1 + CHIEF_LINES + 1 + WORKER_LINES + WORKER_ERRORS


@pytest.fixture
def finished(make_client):
    api = make_client()
    api.template("chatty", spec(["--lines", str(CHIEF_LINES)],
                                workers=["--lines", str(WORKER_LINES), "--stderr-lines", str(WORKER_ERRORS)]))
    job = api.submit("chatty")
    assert api.wait_state(job["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    return api, job["id"]


def _numbers(lines, replica, word):
    return [int(ln["message"].rsplit(" ", 1)[1]) for ln in lines
            if ln["replica"] == replica and f" {word} " in ln["message"]]


def test_pages_follow_the_cursor_without_gaps_or_repeats(finished):
    api, job_id = finished
    lines, since, pages = [], None, 0
    while True:
        page = api.logs(job_id, limit=7, **({"since": since} if since else {}))
        pages += 1
        assert page["state"] == "SUCCEEDED" and len(page["lines"]) <= 7
        lines += page["lines"]
        since = page["cursor"]
        if page["done"]:
            break
        assert pages < 100
    assert len(lines) == TOTAL
    assert _numbers(lines, "workerpool0-0", "line") == list(range(CHIEF_LINES))
    assert _numbers(lines, "workerpool1-0", "line") == list(range(WORKER_LINES))
    assert _numbers(lines, "workerpool1-0", "err") == list(range(WORKER_ERRORS))
    assert {ln["stream"] for ln in lines if " err " in ln["message"]} == {"stderr"}
    assert {ln["stream"] for ln in lines if " err " not in ln["message"]} == {"stdout"}
    assert all(ln["timestamp"] for ln in lines)
    # Each line's cursor resumes right after it.
    tenth = lines[9]
    rest = api.all_logs(job_id, since=tenth["cursor"])
    assert [ln["message"] for ln in rest] == [ln["message"] for ln in lines[10:]]
    # At the end: nothing more, and done.
    end = api.logs(job_id, since=since)
    assert end["lines"] == [] and end["done"] is True and end["cursor"] == since


def test_replica_filter(finished):
    api, job_id = finished
    lines = api.all_logs(job_id, replica="workerpool1-0")
    assert {ln["replica"] for ln in lines} == {"workerpool1-0"}
    assert len(lines) == 1 + WORKER_LINES + WORKER_ERRORS
    assert _numbers(lines, "workerpool1-0", "line") == list(range(WORKER_LINES))


def test_bad_replica_cursor_and_job_are_problems(finished):
    api, job_id = finished
    r = api.c.get(f"/v1/jobs/{job_id}/logs", params={"replica": "workerpool7-0"})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    err = r.json()["errors"][0]
    assert err["field"] == "replica" and "workerpool0-0" in err["fix"]
    for bad in ("nonsense!", "MC0wOi0x", "eyJhIjotMX0"):  # not base64; "0-0:-1"; JSON
        r = api.c.get(f"/v1/jobs/{job_id}/logs", params={"since": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["errors"][0]["field"] == "since"
    r = api.c.get("/v1/jobs/7d7c7e47-8a3c-4a28-9d35-55f1c0f1e2a1/logs")
    assert r.status_code == 404


def test_viewers_read_logs_other_teams_cannot(finished, db_url):
    api, job_id = finished
    viewer = make_token(db_url, "alpha", "viewer", "reader")
    r = api.c.get(f"/v1/jobs/{job_id}/logs", headers=bearer(viewer))
    assert r.status_code == 200 and len(r.json()["lines"]) == TOTAL
    other = make_token(db_url, "beta", "admin")
    r = api.c.get(f"/v1/jobs/{job_id}/logs", headers=bearer(other))
    assert r.status_code == 404
    r = api.c.get(f"/v1/jobs/{job_id}/logs", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401


def test_queued_job_has_no_lines_yet(make_client, tmp_path):
    api = make_client(local_max_running_jobs=1)
    gate = tmp_path / "gate"
    api.template("gated", spec(["--wait-file", str(gate)]))
    blocker = api.submit("gated")
    queued = api.submit("gated")
    api.wait_state(blocker["id"], "RUNNING")
    page = api.logs(queued["id"])
    assert page["state"] == "QUEUED" and page["lines"] == [] and page["done"] is False
    gate.touch()
    api.wait_state(queued["id"], "SUCCEEDED")
    assert [ln["message"] for ln in api.all_logs(queued["id"], since=page["cursor"])] == \
        ["hello from workerpool0-0 as chief:0"]


def test_a_token_revoked_elsewhere_reads_no_logs_though_cached(finished, db_url):
    """The log routes take the caller from the token cache (service/logs/opening.py: thousands
    of followers connecting take no token query each); a token revoked by another process
    (straight in the database: this process's cache still holds it) is refused by the job's
    own query: 401 for the page, the stream and a job that does not exist (never a 404
    that would tell a revoked token which ids exist), and the cache lets it go."""
    from sqlalchemy import update

    from service.auth.service import hash_token
    from service.core.clock import utcnow
    from service.persistence.models import ApiToken
    from service.persistence.session import make_engine, make_session_factory

    api, job_id = finished
    viewer = make_token(db_url, "alpha", "viewer", "revoked-reader")
    r = api.c.get(f"/v1/jobs/{job_id}/logs", headers=bearer(viewer))
    assert r.status_code == 200 and len(r.json()["lines"]) == TOTAL  # now cached
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            s.execute(update(ApiToken).where(ApiToken.token_hash == hash_token(viewer))
                      .values(revoked_at=utcnow()))
            s.commit()
    finally:
        engine.dispose()
    missing = "7d7c7e47-8a3c-4a28-9d35-55f1c0f1e2a1"
    for path, params in ((f"/v1/jobs/{missing}/logs", {}), (f"/v1/jobs/{job_id}/logs", {"follow": "true"}),
                         (f"/v1/jobs/{job_id}/logs", {})):
        r = api.c.get(path, params=params, headers=bearer(viewer))
        assert r.status_code == 401, (path, params, r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
    # A live viewer of the same team still reads, and another team's caller still gets 404.
    assert api.c.get(f"/v1/jobs/{job_id}/logs", headers=bearer(make_token(db_url, "alpha", "viewer"))).status_code == 200
    assert api.c.get(f"/v1/jobs/{job_id}/logs", headers=bearer(make_token(db_url, "beta", "viewer"))).status_code == 404
