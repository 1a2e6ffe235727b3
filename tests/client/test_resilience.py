"""Retries and resumes over a connection that really breaks (a proxy between the
client and the real service drops answers and cuts streams)."""
from __future__ import annotations

import socket

import pytest

from tests.client.conftest import replica_spec
from tests.client.faulty_proxy import FaultyProxy
from trainjobs_client import AsyncClient, Client, ConnectionFailed, JobState

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


def test_nothing_listening_is_connection_failed_after_the_retries(token):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    with Client(f"http://127.0.0.1:{port}", token, retries=2, backoff=0.01) as nowhere:
        with pytest.raises(ConnectionFailed) as failed:
            nowhere.get("00000000-0000-0000-0000-000000000001")
    assert f"127.0.0.1:{port}" in str(failed.value)
