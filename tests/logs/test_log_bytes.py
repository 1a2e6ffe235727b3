"""Log streams and pages are bounded in bytes, whatever a replica prints: a line of
control characters (each escapes to 6 bytes in JSON) is cut for streaming with a visible
marker, pages stop at a byte budget and resume whole, a follower lagging in bytes is cut
(resync), and what all readers and followers hold stays under the process's budget.
Real local jobs, real uvicorn, real HTTP clients."""
from __future__ import annotations

import json
import socket
import threading

import httpx
from httpx_sse import connect_sse

from service.app import create_app
from service.logs.service import cut_message
from tests.backends.localkit import Api, assert_no_processes, settings_for, thread_server
from tests.conftest import ONE_DATABASE, bearer
from tests.waiting import wait_for

pytestmark = ONE_DATABASE

HOSTILE = ("import os, sys, time\n"
           "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
           "pause = float(sys.argv[4])\n"
           "for i in range(int(sys.argv[2])):\n"
           "    print(f'{i:05d}' + '\\x01' * int(sys.argv[3]), flush=True)\n"
           "    if pause and i % 10 == 9: time.sleep(pause)\n")


def hostile(api: Api, gate, lines: int, width: int, pause: float = 0) -> str:
    """`pause`: seconds of silence after every 10 lines (a paced writer, so that a follower in
    a thread of this process, sharing its GIL with the server, keeps up)."""
    api.template("hostile", {"container": {"image_uri": "local", "command": [
        "python", "-c", HOSTILE, str(gate), str(lines), str(width), str(pause)]}})
    job = api.submit("hostile")
    api.wait_state(job["id"], "RUNNING")
    return job["id"]


def test_a_cut_message_says_so_and_fits():
    for text in ("\x01" * 60_000, "é" * 60_000, "\U0001F600" * 60_000, "a" * 60_000):
        out = cut_message(text, 16_384)
        assert len(json.dumps(out)) - 2 <= 16_384
        kept, _, marker = out.partition("…[trainjobs: line cut for streaming, ")
        assert text.startswith(kept) and marker == f"{len(text) - len(kept)} more characters]"
    assert cut_message("\x01" * 100, 16_384) == "\x01" * 100


def test_hostile_lines_are_cut_for_streaming_and_whole_in_pages(db_url, work_dir, token, tmp_path):
    settings = settings_for(db_url, work_dir, logs_stream_line_max_bytes=4096, logs_page_max_bytes=65_536)
    with thread_server(create_app(settings)) as url, httpx.Client(base_url=url, headers=bearer(token),
                                                                  timeout=60) as client:
        api = Api(client)
        gate = tmp_path / "gate"
        job_id = hostile(api, gate, 40, 60_000)
        gate.touch()
        events = []
        with connect_sse(client, "GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as source:
            for sse in source.iter_sse():
                events.append((sse.event, sse.data))
                if sse.event == "end":
                    break
        lines = [json.loads(d) for e, d in events if e == "log"]
        assert len(lines) == 40
        for i, line in enumerate(lines):
            assert len(json.dumps(line["message"])) - 2 <= 4096
            assert line["message"].startswith(f"{i:05d}\x01")
            kept = line["message"].split("…[trainjobs: line cut for streaming, ")[0]
            assert line["message"].endswith(f", {60_005 - len(kept)} more characters]")
        # Pages: a line is 60 KB, the page budget 64 KiB: one line a page, each whole.
        page = api.logs(job_id, limit=1000)
        assert len(page["lines"]) == 1 and page["lines"][0]["message"] == "00000" + "\x01" * 60_000
        whole = api.all_logs(job_id)
        assert [ln["message"] for ln in whole] == [f"{i:05d}" + "\x01" * 60_000 for i in range(40)]
    assert_no_processes(work_dir)


def test_a_follower_lagging_in_bytes_is_cut_and_the_process_holds_its_budget(db_url, work_dir, token, tmp_path):
    # Lines are never the limit here (a million): bytes are.
    settings = settings_for(db_url, work_dir, logs_follower_buffer_lines=1_000_000,
                            logs_reader_buffer_lines=1_000_000, logs_follower_buffer_bytes=256 << 10,
                            logs_reader_buffer_bytes=512 << 10, logs_buffer_bytes=1 << 20,
                            logs_stream_line_max_bytes=16_384)
    app = create_app(settings)
    with thread_server(app) as url, httpx.Client(base_url=url, headers=bearer(token), timeout=60) as client:
        api = Api(client)
        gate = tmp_path / "gate"
        # 600 lines of 8,000 control characters: 29 MB as JSON, far beyond every budget.
        job_id = hostile(api, gate, 600, 8000, pause=0.05)
        port = int(url.rsplit(":", 1)[1])
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", port))
        slow.sendall((f"GET /v1/jobs/{job_id}/logs?follow=true HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n").encode())
        fast: list = []

        def follow():
            with httpx.Client(base_url=url, headers=bearer(token), timeout=60) as c:
                with connect_sse(c, "GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as source:
                    for sse in source.iter_sse():
                        fast.append(sse.event)
                        if sse.event in ("end", "resync"):
                            return

        t = threading.Thread(target=follow)
        t.start()
        hub = app.state.services.log_hub
        wait_for(lambda: len(hub.readers) == 1 and len(next(iter(hub.readers.values())).followers) == 2,
                 "both followers on the shared reader")
        most = [0]
        done = threading.Event()

        def watch():  # what the hub holds, sampled while the lines flow
            while not done.is_set():
                most[0] = max(most[0], hub.held)
                done.wait(0.005)

        w = threading.Thread(target=watch)
        w.start()
        gate.touch()
        t.join(180)
        done.set()
        w.join(10)
        assert fast[-1] == "end" and fast.count("log") == 600
        # The budget, plus one batch for each follower that had nothing pending when it came.
        assert most[0] <= (1 << 20) + 2 * (settings.logs_stream_batch_bytes + 16_384), most[0]
        slow.settimeout(60)
        data = b""
        while b"event: resync" not in data:
            chunk = slow.recv(1 << 16)
            assert chunk, f"no resync: {len(data)} bytes, tail {data[-300:]!r}"
            data += chunk
        slow.close()
        wait_for(lambda: hub.held == 0, "every byte given back")
    assert_no_processes(work_dir)
