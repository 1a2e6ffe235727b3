"""Following logs as Server-Sent Events, read by a real HTTP client (httpx +
httpx-sse) from a real uvicorn server on 127.0.0.1."""
from __future__ import annotations

import json

import httpx
import pytest
from httpx_sse import connect_sse

from service.app import create_app
from tests.backends.localkit import (
    Api,
    assert_no_processes,
    settings_for,
    spec,
    thread_server,
)
from tests.conftest import ONE_DATABASE, bearer

pytestmark = ONE_DATABASE

BEFORE, AFTER = 5, 5  # chief lines printed before and after its gate opens


@pytest.fixture
def live(db_url, work_dir, token):
    """(Api, base url) for the app on a real uvicorn server, in a thread."""
    def start(**overrides):
        settings = settings_for(db_url, work_dir, **overrides)
        return thread_server(create_app(settings))
    return start


def _client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers=bearer(token), timeout=httpx.Timeout(30.0))


def test_follow_resume_with_last_event_id_and_end(live, work_dir, token, tmp_path):
    gate = tmp_path / "gate"
    with live() as url, _client(url, token) as client:
        api = Api(client)
        api.template("stream", spec(["--lines", str(BEFORE), "--wait-file", str(gate), "--lines-after", str(AFTER)],
                                    workers=["--lines", "3", "--wait-file", str(gate)]))
        job_id = api.submit("stream")["id"]
        initial = 1 + BEFORE + 1 + 3  # hello + lines, for each replica

        # 1. Follow until every line printed before the gate has arrived, then hang up
        #    having only "seen" the first six.
        first = []
        with connect_sse(client, "GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as source:
            assert source.response.status_code == 200
            assert source.response.headers["content-type"].startswith("text/event-stream")
            for sse in source.iter_sse():
                assert sse.event == "log"
                data = json.loads(sse.data)
                assert sse.id == data["cursor"]
                first.append(data)
                if len(first) == initial:
                    break
        seen = first[:6]

        # 2. Reconnect from the sixth event, as an EventSource would (Last-Event-ID,
        #    Accept: text/event-stream, no follow parameter), and open the gate while connected.
        resumed, end = [], None
        with connect_sse(client, "GET", f"/v1/jobs/{job_id}/logs",
                         headers={"Last-Event-ID": seen[-1]["cursor"]}) as source:
            for sse in source.iter_sse():
                if sse.event == "end":
                    end = json.loads(sse.data)
                    assert sse.id == end["cursor"]
                    break
                resumed.append(json.loads(sse.data))
                if len(resumed) == initial - 6:
                    gate.touch()
        assert end is not None and end["state"] == "SUCCEEDED" and end["error"] is None

        messages = [d["message"] for d in seen + resumed]
        assert len(messages) == len(set(messages)) == initial + AFTER  # no gap, no repeat
        assert [d["message"] for d in resumed[:initial - 6]] == [d["message"] for d in first[6:]]
        chief_after = [d["message"] for d in resumed if d["replica"] == "workerpool0-0" and " after " in d["message"]]
        assert chief_after == [f"workerpool0-0 after {i}" for i in range(AFTER)]
        # The stream held everything the page API holds.
        pages = api.all_logs(job_id)
        assert sorted(messages) == sorted(ln["message"] for ln in pages)
        assert {(d["message"], d["timestamp"]) for d in seen + resumed} == \
            {(ln["message"], ln["timestamp"]) for ln in pages}  # the same timestamps, the same format

        # 3. A finished job: the whole log, then end, at once; the replica filter applies.
        with connect_sse(client, "GET", f"/v1/jobs/{job_id}/logs", params={"replica": "workerpool1-0"}) as source:
            events = list(source.iter_sse())
        assert [e.event for e in events] == ["log"] * 4 + ["end"]
        assert {json.loads(e.data)["replica"] for e in events[:-1]} == {"workerpool1-0"}
    assert_no_processes(work_dir)


def test_heartbeats_keep_a_quiet_stream_open(live, work_dir, token, tmp_path):
    gate = tmp_path / "gate"
    with live(logs_heartbeat_seconds=0.2) as url, _client(url, token) as client:
        api = Api(client)
        api.template("quiet", spec(["--wait-file", str(gate)]))
        job_id = api.submit("quiet")["id"]
        api.wait_state(job_id, "RUNNING")
        raw = []
        with client.stream("GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as r:
            assert r.status_code == 200 and r.headers["cache-control"] == "no-cache"
            for line in r.iter_lines():
                raw.append(line)
                if line == ": keep-alive" and raw.count(": keep-alive") == 2:
                    break
        assert raw[0].startswith(": following job")
        # The first event carries the reconnect delay; heartbeats may come before it.
        first = raw.index("retry: 1000")
        assert raw[first + 1].startswith("id: ")
        assert all(line in (": keep-alive", "") for line in raw[1:first])
        assert any(line.startswith("data: ") and "hello from workerpool0-0" in line for line in raw)
        gate.touch()
        api.wait_state(job_id, "SUCCEEDED")
    assert_no_processes(work_dir)


def test_heartbeats_before_the_first_line_never_make_an_empty_event(live, work_dir, token, tmp_path):
    """A follower quiet for a heartbeat before its first line: the `retry:` field goes with the
    first event, not with a comment (a block of `retry:` and a comment is an event without data
    to httpx-sse; it choked followers that waited longer than a heartbeat under load)."""
    gate = tmp_path / "gate"
    silent = ("import os, sys, time\n"
              "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
              "print('after the gate', flush=True)\n")
    with live(logs_heartbeat_seconds=0.2) as url, _client(url, token) as client:
        api = Api(client)
        api.template("silent", {"container": {"image_uri": "local", "command": ["python", "-c", silent, str(gate)]}})
        job_id = api.submit("silent")["id"]
        api.wait_state(job_id, "RUNNING")
        raw: list[str] = []
        with client.stream("GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as r:
            for line in r.iter_lines():
                raw.append(line)
                if line == ": keep-alive" and raw.count(": keep-alive") == 2:
                    gate.touch()  # two heartbeats went out before any line existed
                if line.startswith("event: end"):
                    break
        blocks, block = [], []
        for line in raw:
            if line:
                block.append(line)
            elif block:
                blocks.append(block)
                block = []
        fielded = [b for b in blocks if not all(ln.startswith(":") for ln in b)]
        assert fielded, raw
        # Every block with a field is an event with data; the first of them carries `retry:`.
        assert all(any(ln.startswith("data: ") for ln in b) for b in fielded), raw
        assert fielded[0][0] == "retry: 1000" and sum(ln.startswith("retry:") for ln in raw) == 1, raw
        assert any("after the gate" in ln for ln in fielded[0]), raw
        # And as an SSE client sees it: a `log` event, then `end`, nothing empty between.
        with connect_sse(client, "GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as source:
            assert [e.event for e in source.iter_sse()] == ["log", "end"]
    assert_no_processes(work_dir)


def test_bad_last_event_id_is_a_problem_not_a_broken_stream(live, work_dir, token):
    with live() as url, _client(url, token) as client:
        api = Api(client)
        api.template("one", spec(["--exit", "0"]))
        job_id = api.submit("one")["id"]
        r = client.get(f"/v1/jobs/{job_id}/logs", headers={"Accept": "text/event-stream", "Last-Event-ID": "x!"})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "since"
        api.wait_state(job_id, "SUCCEEDED")
