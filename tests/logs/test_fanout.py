"""Followers of one job share one reader (service/logs/fanout.py): every follower gets
the same lines, in order, and the end; a follower resumes with Last-Event-ID; a slow
follower is cut with a resync event and never holds up a fast one. Real local jobs,
real uvicorn, real HTTP clients."""
from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest
from httpx_sse import connect_sse

from service.app import create_app
from tests.backends.localkit import Api, assert_no_processes, settings_for, thread_server
from tests.conftest import ONE_DATABASE, bearer
from tests.waiting import wait_for

pytestmark = ONE_DATABASE

TALKER = ("import os, sys, time\n"
          "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
          "pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0\n"
          "for i in range(int(sys.argv[2])):\n"
          "    print(f'line {i} ' + 'x' * int(sys.argv[3]), flush=True)\n"
          "    if pause and i % 50 == 49: time.sleep(pause)\n")


def talker(api: Api, name: str, gate, lines: int, width: int = 10, pause: float = 0) -> str:
    """`pause`: seconds of silence after every 50 lines (a paced writer)."""
    api.template(name, {"container": {"image_uri": "local", "command": [
        "python", "-c", TALKER, str(gate), str(lines), str(width), str(pause)]}})
    job = api.submit(name)
    api.wait_state(job["id"], "RUNNING")
    return job["id"]


def follow_all(url: str, token: str, job_id: str, out: list, headers: dict | None = None) -> None:
    with httpx.Client(base_url=url, headers={**bearer(token), **(headers or {})}, timeout=60) as c:
        with connect_sse(c, "GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as source:
            for sse in source.iter_sse():
                out.append((sse.event, sse.id, json.loads(sse.data)))
                if sse.event in ("end", "resync"):
                    return


def test_followers_share_one_reader_and_get_identical_lines(db_url, work_dir, token, tmp_path):
    settings = settings_for(db_url, work_dir)
    app = create_app(settings)
    with thread_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as client:
        api = Api(client)
        gate = tmp_path / "gate"
        job_id = talker(api, "talker", gate, 200)
        seen: list[list] = [[] for _ in range(6)]
        threads = [threading.Thread(target=follow_all, args=(url, token, job_id, s)) for s in seen]
        for t in threads:
            t.start()
        wait_for(lambda: "trainjobs_streams_open 6.0" in client.get("/metrics").text, "six followers attached")
        hub = app.state.services.log_hub
        # All six joined one reader (its followers), not six readers.
        wait_for(lambda: len(hub.readers) == 1 and len(next(iter(hub.readers.values())).followers) == 6,
                 "six followers on one reader")
        assert str(next(iter(hub.readers))[0]) == job_id
        gate.touch()
        for t in threads:
            t.join(120)
        expected = [f"line {i} " + "x" * 10 for i in range(200)]
        for s in seen:
            assert s[-1][0] == "end" and s[-1][2]["state"] == "SUCCEEDED"
            assert [d["message"] for ev, _, d in s if ev == "log"] == expected
            assert [i for ev, i, _ in s if ev == "log"] == [i for ev, i, _ in seen[0] if ev == "log"]
        # One reader served all six: far fewer reads than six followers polling would make.
        assert hub.readers == {}  # it ended with the job
    assert_no_processes(work_dir)


def test_a_follower_resumes_from_last_event_id(db_url, work_dir, token, tmp_path):
    with thread_server(create_app(settings_for(db_url, work_dir))) as url, \
            httpx.Client(base_url=url, headers=bearer(token), timeout=30) as client:
        api = Api(client)
        gate = tmp_path / "gate"
        job_id = talker(api, "talker", gate, 50)
        gate.touch()
        api.wait_state(job_id, "SUCCEEDED")
        full: list = []
        follow_all(url, token, job_id, full)
        logs = [x for x in full if x[0] == "log"]
        assert len(logs) == 50
        rest: list = []
        follow_all(url, token, job_id, rest, headers={"Last-Event-ID": logs[19][1]})
        assert [d["message"] for ev, _, d in rest if ev == "log"] == [d["message"] for _, _, d in logs[20:]]
        assert rest[-1][0] == "end"


def test_a_slow_follower_is_cut_and_never_holds_up_a_fast_one(db_url, work_dir, token, tmp_path):
    # 500 lines (1 MB) of lag: far more than a reading client falls behind by, far less than
    # what the slow one (which reads nothing) is sent once its socket buffers are full.
    settings = settings_for(db_url, work_dir, logs_follower_buffer_lines=500)  # well under the byte bound
    app = create_app(settings)
    with thread_server(app) as url, \
            httpx.Client(base_url=url, headers=bearer(token), timeout=30) as client:
        api = Api(client)
        gate = tmp_path / "gate"
        # ~10 MB, more than socket buffers hold, paced (50 lines, then 20 ms) so that the fast
        # follower, a client thread sharing this process's GIL with the server, keeps up.
        job_id = talker(api, "talker", gate, 5000, width=2000, pause=0.02)
        # The slow one connects and then reads nothing at all until the fast one is done.
        port = int(url.rsplit(":", 1)[1])
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        slow.connect(("127.0.0.1", port))
        slow.sendall((f"GET /v1/jobs/{job_id}/logs?follow=true HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
        fast: list = []
        t = threading.Thread(target=follow_all, args=(url, token, job_id, fast))
        t.start()
        hub = app.state.services.log_hub
        wait_for(lambda: len(hub.readers) == 1 and len(next(iter(hub.readers.values())).followers) == 2,
                 "both followers on the shared reader")
        gate.touch()
        t.join(180)
        assert not t.is_alive()
        assert fast[-1][0] == "end" and len([x for x in fast if x[0] == "log"]) == 5000
        # Now the slow one reads what it was sent: its stream ends with a resync event that
        # names the last line it was given, from which it can resume.
        slow.settimeout(60)
        data = b""
        # Until the resync event is whole: its data line can come in the next segment (a fresh-clone
        # run read `{"c` and nothing more).
        while b"event: resync" not in data or b"\n\n" not in data.split(b"event: resync", 1)[1]:
            chunk = slow.recv(1 << 16)
            assert chunk, ("the slow follower's stream ended without a resync event: "
                           f"{len(data)} bytes, {data.count(b'event: log')} lines, tail {data[-300:]!r}")
            data += chunk
        slow.close()
        tail = data.split(b"event: resync", 1)[1].split(b"\n\n", 1)[0]
        payload = json.loads(tail.split(b"data: ", 1)[1])
        assert payload["cursor"] and "Last-Event-ID" in payload["reason"]
    assert_no_processes(work_dir)


def test_many_followers_connecting_at_once_all_get_their_stream(db_url, work_dir, token, tmp_path):
    # Opening a stream needs a thread and a database connection (the token, the job): with
    # more followers connecting at once than the pool has connections, they used to wait on
    # each other until the pool timeout and get 503s. They now queue for request slots.
    settings = settings_for(db_url, work_dir).model_copy(
        update={"max_concurrent_requests": 2, "db_pool_timeout_seconds": 1.0, "max_streams_per_caller": 200})
    app = create_app(settings)
    with thread_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=30) as client:
        api = Api(client)
        gate = tmp_path / "gate"
        job_id = talker(api, "talker", gate, 20)
        n = 120   # the pool holds 2 + 8 connections, the thread pool 2 + 16 threads
        seen: list[list] = [[] for _ in range(n)]
        threads = [threading.Thread(target=follow_all, args=(url, token, job_id, s)) for s in seen]
        for t in threads:
            t.start()
        # The gauge counts streams whose response has started (not those still opening).
        wait_for(lambda: f"trainjobs_streams_open {n}.0" in client.get("/metrics").text, "every follower attached")
        assert client.get(f"/v1/jobs/{job_id}").status_code == 200   # ordinary requests still served
        gate.touch()
        for t in threads:
            t.join(120)
        expected = [f"line {i} " + "x" * 10 for i in range(20)]
        for s in seen:
            assert s and s[-1][0] == "end", s[-1:]
            assert [d["message"] for ev, _, d in s if ev == "log"] == expected
    assert_no_processes(work_dir)


def test_a_reader_gives_fan_outs_at_most_its_share_of_the_loop(monkeypatch):
    from pydantic import ValidationError

    from service.logs.fanout import next_read_after
    from service.slices import Settings
    assert next_read_after(0.1, 0.001, 0.25) == 0.1                   # a few followers: the floor
    assert next_read_after(0.1, 0.060, 0.25) == pytest.approx(0.18)   # a thousand: 60 ms of fan-out, 180 ms after
    assert next_read_after(0.1, 0.060, 1.0) == 0.1                    # share 1: read at the floor regardless
    assert Settings().logs_fanout_loop_share == 0.1  # 0.25 left GETs p99 476 ms beside 5,000 followers
    for bad in ("0", "1.5"):
        monkeypatch.setenv("TRAINJOBS_LOGS_FANOUT_LOOP_SHARE", bad)
        with pytest.raises(ValidationError):
            Settings()


def test_a_batch_shared_by_followers_counts_once_in_the_process_bytes():
    """hub.held, bounded by TRAINJOBS_LOGS_BUFFER_BYTES, counts a batch once however many
    followers and readers hold it (one bytes object, shared): counted per follower, 5,000
    followers of one 128 KiB batch "held" 640 MB and were cut with resync for memory the
    process never used. Each follower's own lag limit still counts it for that follower."""
    from service.logs.batches import Batch, FanoutSettings
    from service.logs.fanout import Follower, Hub

    cfg = FanoutSettings(process_bytes=3000, follower_bytes=2500)
    hub = Hub(None, cfg)
    followers = [Follower(hub, None) for _ in range(100)]
    first, second = Batch(b"x" * 1000, ["c1"], [1000]), Batch(b"y" * 1000, ["c2"], [1000])
    for batch, cursor in ((first, "c1"), (second, "c2")):
        for f in followers:
            assert f.give(batch, cursor)       # 100 x 2 x 1000 bytes given, 2,000 held
    assert hub.held == 2000 and all(f.pending_bytes == 2000 for f in followers)
    followers[0].take()
    assert hub.held == 2000                    # the others still hold both
    for f in followers[1:]:
        f.take()
    assert hub.held == 0
    # Past the process's bytes a lagging follower is still cut: a third batch fits (3,000),
    # a fourth does not, for a follower that has not sent what it was given.
    third, fourth = Batch(b"z" * 1000, ["c3"], [1000]), Batch(b"w" * 1000, ["c4"], [1000])
    lagging = followers[1]
    assert lagging.give(first, "c1") and lagging.give(second, "c2") and lagging.give(third, "c3")
    assert hub.held == 3000
    assert not lagging.give(fourth, "c4") and lagging.done
    assert b"resync" in lagging.chunks[-1]
    lagging.release()
    assert hub.held == 0
