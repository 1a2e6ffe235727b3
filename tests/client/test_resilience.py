"""Retries and resumes over a connection that really breaks (a proxy between the
client and the real service drops answers and cuts streams)."""
from __future__ import annotations

import socket

import pytest

from tests.client.conftest import replica_spec
from tests.client.faulty_proxy import FaultyProxy
from tests.conftest import ONE_DATABASE
from trainjobs_client import AsyncClient, Client, ConnectionFailed, JobState

pytestmark = ONE_DATABASE

LINES = 40


@pytest.fixture
def proxy(server):
    p = FaultyProxy(int(server.rsplit(":", 1)[1]))
    yield p
    p.close()


def test_a_lost_submit_answer_is_retried_with_the_same_key_and_makes_one_job(tj, proxy, token):
    tj.templates.create("one", replica_spec("--exit", "0"))
    proxy.drop_response_to.append(b"POST /v1/jobs ")
    with Client(proxy.url, token, backoff=0.01) as flaky:
        job = flaky.submit("one")
    assert proxy.dropped == 1
    assert [j.id for j in tj.list()] == [job.id]  # the retry got the first attempt's job back
    assert [e.reason for e in tj.events(job)][0] == "submitted"


def test_without_a_key_a_lost_submit_answer_is_not_retried(tj, proxy, token):
    tj.templates.create("one", replica_spec("--exit", "0"))
    proxy.drop_response_to.append(b"POST /v1/jobs ")
    with Client(proxy.url, token, backoff=0.01) as flaky:
        with pytest.raises(ConnectionFailed):
            flaky.submit("one", idempotency_key=False)
    # The service made the job; a blind retry would have launched a second one.
    assert len(list(tj.list())) == 1


def test_follow_resumes_after_the_last_line_received(tj, proxy, token):
    tj.templates.create("chatty", replica_spec("--lines", str(LINES)))
    job = tj.submit("chatty")
    tj.wait(job, timeout=60)
    proxy.cut_streams_after.extend([7, 12])
    with Client(proxy.url, token, backoff=0.01) as flaky:
        stream = flaky.logs(job, follow=True)
        messages = [line.message for line in stream]
    assert proxy.cuts == 2 and len(proxy.follow_requests) == 3
    assert messages == ["hello from workerpool0-0 as chief:0"] + [f"workerpool0-0 line {i}" for i in range(LINES)]
    assert stream.end.state is JobState.SUCCEEDED
    # Each reconnection asked for what came after the last complete event.
    assert b"last-event-id" not in proxy.follow_requests[0].lower()
    assert all(b"last-event-id" in head.lower() for head in proxy.follow_requests[1:])


@pytest.mark.anyio
async def test_async_follow_resumes_too(tj, proxy, token):
    tj.templates.create("chatty", replica_spec("--lines", str(LINES)))
    job = tj.submit("chatty")
    tj.wait(job, timeout=60)
    proxy.cut_streams_after.append(5)
    async with AsyncClient(proxy.url, token, backoff=0.01) as flaky:
        stream = flaky.logs(job, follow=True)
        messages = [line.message async for line in stream]
    assert proxy.cuts == 1
    assert messages == ["hello from workerpool0-0 as chief:0"] + [f"workerpool0-0 line {i}" for i in range(LINES)]
    assert stream.end.state is JobState.SUCCEEDED


def test_a_follower_refused_for_capacity_comes_back_when_told(db_url, work_dir, token, tmp_path):  # noqa: F811
    """The one stream place of the process is taken: a follow answers 503 with Retry-After and
    problem+json, and the client's follower waits that long (it retried after its own backoff,
    10 ms here, and hammered the process) before it comes back and gets every line."""
    import threading

    import httpx

    from service.app import create_app
    from tests.backends.localkit import settings_for, thread_server
    from tests.waiting import wait_for

    gate = tmp_path / "gate"
    with thread_server(create_app(settings_for(db_url, work_dir, max_streams=1))) as url:
        proxy = FaultyProxy(int(url.rsplit(":", 1)[1]))
        held = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30)
        try:
            with Client(url, token, backoff=0.01) as tj:
                tj.templates.create("waiter", replica_spec("--lines", "2", "--wait-file", str(gate),
                                                           "--lines-after", "2"))
                job = tj.submit("waiter")
            path = f"/v1/jobs/{job.id}/logs?follow=true"
            held.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
            assert held.recv(4096).startswith(b"HTTP/1.1 200")
            r = httpx.get(url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", r.text
            assert int(r.headers["retry-after"]) >= 1 and "TRAINJOBS_MAX_STREAMS" in r.json()["detail"]
            messages: list[str] = []

            def follow() -> None:
                with Client(proxy.url, token, backoff=0.01) as flaky:
                    messages.extend(line.message for line in flaky.logs(job, follow=True))
            thread = threading.Thread(target=follow)
            thread.start()
            wait_for(lambda: proxy.follow_statuses == [503], "the follower's first attempt refused", 30)
            held.close()
            gate.touch()
            thread.join(60)
            assert not thread.is_alive()
        finally:
            held.close()
            proxy.close()
    times = proxy.follow_times
    assert times[1] - times[0] >= 1.0, times  # not before the Retry-After it was given
    assert proxy.follow_statuses[:2] == [503, 200]
    assert messages == ["hello from workerpool0-0 as chief:0", "workerpool0-0 line 0", "workerpool0-0 line 1",
                        "workerpool0-0 after 0", "workerpool0-0 after 1"]


def test_nothing_listening_is_connection_failed_after_the_retries(token):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    with Client(f"http://127.0.0.1:{port}", token, retries=2, backoff=0.01) as nowhere:
        with pytest.raises(ConnectionFailed) as failed:
            nowhere.get("00000000-0000-0000-0000-000000000001")
    assert f"127.0.0.1:{port}" in str(failed.value)
