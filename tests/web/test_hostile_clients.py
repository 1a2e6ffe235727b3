"""Hostile HTTP clients against `trainjobs serve` as a real process, over raw sockets:
slow bodies hold no request slot and are cut (408), bodies are bounded in bytes per
process (503), a client that leaves mid-body leaves one INFO line, and what counts as a
stream is the route's own reading of `follow` (streams per credential capped)."""
from __future__ import annotations

import json
import re
import socket

import httpx
import pytest

from service.ui.sessions import SESSION_COOKIE
from service.web.overload import UI_SESSION_COOKIE, caller_of, parses_true, stream_kind
from tests.apikit import DEMO
from tests.servekit import TOKEN, Serve
from tests.waiting import wait_for

WAIT = 30  # seconds a socket waits for an answer before the test fails: never reached when it works


def serve(tmp_path, **env) -> Serve:
    base = {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": "0"}  # jobs stay QUEUED: their log streams stay open
    return Serve(tmp_path / "cwd", base | {f"TRAINJOBS_{k.upper()}": str(v) for k, v in env.items()},
                 log_level="info").ready()


def slow_post(port: int, length: int = 100_000, first: bytes = b'{"template') -> socket.socket:
    """A POST head with `Content-Length: length`, then a few bytes of body and nothing more."""
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % length + first)
    return s


def gauge(service: Serve, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", httpx.get(service.url + "/metrics", timeout=10).text, re.M)
    return float(m.group(1)) if m else -1.0


def answer_of(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return out
        if not chunk:
            return out
        out += chunk


@pytest.mark.slow
def test_slow_anonymous_bodies_hold_no_request_slot(tmp_path):
    """40 clients trickling bodies, ten times the request slots: an authenticated caller is
    answered normally, and the slow ones are cut when their time is up (408)."""
    service = serve(tmp_path, max_concurrent_requests=4, request_queue_seconds=0.2, http_body_timeout_seconds=15)
    slow = []
    try:
        slow = [slow_post(service.port) for _ in range(40)]
        # The real signal that all forty are inside the server, reading their bodies.
        wait_for(lambda: gauge(service, "trainjobs_request_bodies_reading") == 40, "40 bodies being read", WAIT)
        assert gauge(service, "trainjobs_requests_in_flight") == 0  # not one holds a request slot
        for _ in range(15):
            r = service.client.get("/v1/jobs")
            assert r.status_code == 200, r.text
        assert service.client.post("/v1/templates", json=DEMO).status_code == 201
        assert gauge(service, "trainjobs_request_bodies_reading") == 40  # still there, still harmless
        for s in slow:  # their time runs out: each is told so and closed
            answer = answer_of(s)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"TRAINJOBS_HTTP_BODY_TIMEOUT_SECONDS" in answer
    finally:
        for s in slow:
            s.close()
        service.stop()
    assert "Traceback" not in service.log()


def test_a_body_sent_at_a_fair_pace_earns_its_time(tmp_path):
    """The deadline grows with what arrives: 8 KB earn about 8 s beyond the base second, so
    the body's end, sent after more than the base second, is still read."""
    service = serve(tmp_path, http_body_timeout_seconds=1, http_body_min_bytes_per_second=1024,
                    http_header_timeout_seconds=0.5)
    try:
        body = b'{"name": "paced", "role": "viewer", "pad": "' + b"x" * 8000 + b'"}'
        s = socket.create_connection(("127.0.0.1", service.port), timeout=WAIT)
        s.sendall(b"POST /v1/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (TOKEN.encode(), len(body))
                  + body[:-10])
        # The real signal that more than the base second has passed: three request heads on
        # other connections timing out (0.5 s each), one after the other.
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", service.port), timeout=WAIT) as stalled:
                stalled.sendall(b"GET /healthz HTTP/1.1\r\n")
                assert answer_of(stalled).startswith(b"HTTP/1.1 408")
        s.sendall(body[-10:])
        answer = answer_of(s)
        assert re.match(rb"HTTP/1.1 (201|422)", answer), answer[:300]  # read whole: the route answered
        s.close()
    finally:
        service.stop()


def test_a_client_that_leaves_mid_body_leaves_one_info_line(tmp_path):
    service = serve(tmp_path)
    try:
        s = slow_post(service.port, 5000, b'{"temp')
        wait_for(lambda: gauge(service, "trainjobs_request_bodies_reading") == 1, "the body being read", WAIT)
        s.close()
        wait_for(lambda: "disconnected mid-body" in service.log(), "the disconnect logged", WAIT)
        assert service.client.get("/v1/jobs").status_code == 200
    finally:
        service.stop()
    log = service.log()
    assert log.count("disconnected mid-body") == 1
    line = next(ln for ln in log.splitlines() if "disconnected mid-body" in ln)
    assert " INFO " in line, line
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_bodies_held_by_the_process_are_bounded_in_bytes(tmp_path):
    """Bytes count as they arrive: a body that declares a megabyte and sends nothing holds
    nothing; one that sent most of it holds that, and another body that would not fit beside
    it is 503 at once; a small one still passes."""
    service = serve(tmp_path, http_body_buffer_bytes=1 << 20, max_body_bytes=1 << 20)
    try:
        empty = slow_post(service.port, 1 << 20, b"")
        wait_for(lambda: gauge(service, "trainjobs_request_bodies_reading") == 1, "the empty body read", WAIT)
        assert gauge(service, "trainjobs_request_body_bytes") == 0
        room = len(json.dumps(DEMO)) + 200  # what is left beside the hog: the template fits, no more
        sent = (1 << 20) - room
        hog = slow_post(service.port, sent + 10, b"x" * sent)  # ten bytes short of its end
        wait_for(lambda: gauge(service, "trainjobs_request_body_bytes") == sent, "the budget taken", WAIT)
        r = httpx.post(service.url + "/v1/templates", json=DEMO | {"description": "x" * 5000},
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT)
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert "TRAINJOBS_HTTP_BODY_BUFFER_BYTES" in r.json()["detail"]
        assert service.client.post("/v1/templates", json=DEMO).status_code == 201  # it fits
        hog.close()
        empty.close()
        wait_for(lambda: gauge(service, "trainjobs_request_body_bytes") == 0, "the budget given back", WAIT)
    finally:
        service.stop()


# -- what is a stream ------------------------------------------------------------------

@pytest.mark.parametrize("value", ["y", "Y", "yes", "on", "t", "true", "True", "1", "n", "no", "off", "f",
                                   "false", "0", "maybe", "", "2", "yes please", "true&follow=", "&follow=on"])
def test_the_admission_layer_reads_follow_as_the_route_does(value):
    """The route's own parser (pydantic, via FastAPI) decides; the admission layer asks it."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    app = FastAPI()

    @app.get("/v1/jobs/{job_id}/logs")
    def route(follow: bool = False):
        return {"follow": follow}

    r = TestClient(app).get(f"/v1/jobs/x/logs?follow={value}")  # repeated: the route reads the last
    routed = r.json()["follow"] if r.status_code == 200 else False
    if "&" not in value:
        assert parses_true(value) is routed
    scope = {"type": "http", "method": "GET", "path": "/v1/jobs/x/logs", "headers": [],
             "query_string": f"follow={value}".encode()}
    assert stream_kind(scope) is routed


def test_the_ui_streams_are_streams_whatever_they_accept():
    for path in ("/ui/stream", "/ui/jobs/00000000-0000-0000-0000-000000000000/logs/stream"):
        assert stream_kind({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""})
    # An event-stream Accept on a route that never streams is an ordinary request.
    assert not stream_kind({"type": "http", "method": "POST", "path": "/v1/jobs",
                            "headers": [(b"accept", b"text/event-stream")], "query_string": b""})
    assert stream_kind({"type": "http", "method": "GET", "path": "/v1/jobs/x/logs",
                        "headers": [(b"accept", b"text/event-stream")], "query_string": b""})


def open_stream(port: int, path: str, token: str = TOKEN, extra: str = "") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n{extra}\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return s


def test_follow_y_streams_hold_no_slot_and_are_capped_per_caller(tmp_path):
    """`follow=y` streams (pydantic reads y as true): with two request slots, five of them
    leave other requests answered; a credential's streams are capped (429)."""
    service = serve(tmp_path, max_concurrent_requests=2, request_queue_seconds=0.2, max_streams_per_caller=5)
    streams = []
    try:
        assert service.client.post("/v1/templates", json=DEMO).status_code == 201
        job = service.client.post("/v1/jobs", json={"template": "mwms-demo"}).json()  # stays QUEUED
        streams = [open_stream(service.port, f"/v1/jobs/{job['id']}/logs?follow=y") for _ in range(5)]
        assert gauge(service, "trainjobs_streams_open") == 5
        for _ in range(10):
            assert service.client.get(f"/v1/jobs/{job['id']}").status_code == 200
        r = service.client.get(f"/v1/jobs/{job['id']}/logs", params={"follow": "on"})
        assert r.status_code == 429 and "TRAINJOBS_MAX_STREAMS_PER_CALLER" in r.json()["detail"], r.text
        # The same token written otherwise is the same caller.
        r = httpx.get(f"{service.url}/v1/jobs/{job['id']}/logs", params={"follow": "t"},
                      headers={"Authorization": f"bEARER {TOKEN}"}, timeout=WAIT)
        assert r.status_code == 429, r.text
        # Another credential has its own quota.
        other = service.client.post("/v1/tokens", json={"name": "other", "role": "viewer"}).json()["token"]
        streams.append(open_stream(service.port, f"/v1/jobs/{job['id']}/logs?follow=1", other))
    finally:
        for s in streams:
            s.close()
        service.stop()


def test_the_stream_cap_counts_the_credential_the_route_authenticates_with():
    """The API authenticates by the bearer token alone, the UI by its session cookie alone:
    anything else in the request (a made-up cookie, a made-up token, a second Cookie header
    shadowed by a later one) is no new caller."""
    def scope(path: str, *headers: tuple[bytes, bytes]) -> dict:
        return {"type": "http", "method": "GET", "path": path, "headers": list(headers), "query_string": b""}

    api, ui = "/v1/jobs/x/logs", "/ui/stream"
    bearer = (b"authorization", b"Bearer secret")
    one = caller_of(scope(api, bearer))
    for cookie in (b"trainjobs_session=made-up-1", b"trainjobs_session=made-up-2; a=b", b"x_trainjobs_session=z"):
        assert caller_of(scope(api, bearer, (b"cookie", cookie))) == one
    assert caller_of(scope(api, (b"authorization", b"bEARER secret"))) == one
    assert caller_of(scope(api, (b"authorization", b"Bearer other"))) != one
    session = (b"cookie", b"trainjobs_session=signed")
    mine = caller_of(scope(ui, session))
    assert caller_of(scope(ui, session, (b"authorization", b"Bearer made-up"))) == mine
    assert caller_of(scope(ui, (b"cookie", b"a_trainjobs_session=made-up; trainjobs_session=signed"))) == mine
    # Starlette reads every Cookie header, the last value winning: so does the cap.
    assert caller_of(scope(ui, (b"cookie", b"trainjobs_session=made-up"), session)) == mine
    assert caller_of(scope(ui, (b"cookie", b"trainjobs_session=another"))) != mine
    assert UI_SESSION_COOKIE == SESSION_COOKIE


def test_a_made_up_cookie_beside_a_token_opens_no_more_streams(tmp_path):
    """It did: the cap counted token and cookie together, so a viewer sending a fresh cookie
    with each request opened 100 streams where 64 was the cap."""
    service = serve(tmp_path, max_streams_per_caller=3)
    streams = []
    try:
        assert service.client.post("/v1/templates", json=DEMO).status_code == 201
        job = service.client.post("/v1/jobs", json={"template": "mwms-demo"}).json()  # stays QUEUED
        path = f"/v1/jobs/{job['id']}/logs?follow=true"
        streams = [open_stream(service.port, path, extra=f"Cookie: trainjobs_session=made-up-{i}\r\n")
                   for i in range(3)]
        r = httpx.get(service.url + path, headers={"Authorization": f"Bearer {TOKEN}"},
                      cookies={"trainjobs_session": "made-up-4"}, timeout=WAIT)
        assert r.status_code == 429 and "TRAINJOBS_MAX_STREAMS_PER_CALLER" in r.json()["detail"], r.text
    finally:
        for s in streams:
            s.close()
        service.stop()


def test_file_downloads_are_streams():
    """A file sent as fast as its reader takes it holds no request slot: 40 unread downloads of
    a 43 MB log held every slot, and other teams' requests answered 503. The API docs' assets
    (Swagger's 1.5 MB bundle, in 64 KiB chunks, to anyone) are files too; the UI's static
    files fit in one chunk (sent whole at once, they hold nothing)."""
    for path in ("/ui/jobs/00000000-0000-0000-0000-000000000000/logs.txt", "/docs-assets/swagger-ui-bundle.js"):
        assert stream_kind({"type": "http", "method": "GET", "path": path, "headers": [],
                            "query_string": b"replica=workerpool0-0"}), path
    assert not stream_kind({"type": "http", "method": "GET", "path": "/ui/static/ui.css", "headers": [],
                            "query_string": b""})
    from service.ui.render import STATIC
    assert all(f.stat().st_size < 65536 for f in STATIC.iterdir()), "a UI static file past one chunk: a stream"


BIG_LOG = {"name": "big-log", "spec": {"container": {"image_uri": "local", "command": [
    "python", "-c", "import sys\nfor i in range(12000): sys.stdout.write(f'{i:08} ' + 'x' * 1000 + '\\n')"]}}}


def unread_download(port: int, path: str, headers: str) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that takes nothing more
    s.settimeout(WAIT)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    assert s.recv(1024).startswith(b"HTTP/1.1 200")
    return s


def test_unread_file_downloads_hold_no_request_slot(tmp_path):
    """Six downloads of a 12 MB log that are never read, three times the request slots: another
    caller's requests are still answered (the downloads are streams: each gave its slot back
    as its response started). And a download has the whole log."""
    from tests.web.test_stopping import ui_cookie

    service = serve(tmp_path, max_concurrent_requests=2, request_queue_seconds=0.2, local_max_running_jobs=1,
                    local_work_dir=tmp_path / "runs")
    downloads = []
    try:
        assert service.client.post("/v1/templates", json=BIG_LOG).status_code == 201
        job = service.client.post("/v1/jobs", json={"template": "big-log"}).json()
        wait_for(lambda: service.client.get(f"/v1/jobs/{job['id']}").json()["state"] == "SUCCEEDED", "SUCCEEDED", 90)
        cookie = ui_cookie(service.url)
        whole = httpx.get(f"{service.url}/ui/jobs/{job['id']}/logs.txt", headers={"Cookie": cookie}, timeout=WAIT)
        # Every line: the download stopped at the first read that the backend's byte cap cut short.
        assert whole.text.count(" x") == 12000 and f"{11999:08} x" in whole.text, len(whole.content)
        for _ in range(6):
            downloads.append(unread_download(service.port, f"/ui/jobs/{job['id']}/logs.txt", f"Cookie: {cookie}\r\n"))
        assert gauge(service, "trainjobs_streams_open") == 6
        other = service.client.post("/v1/tokens", json={"name": "other", "role": "viewer"}).json()["token"]
        for _ in range(10):
            r = httpx.get(f"{service.url}/v1/templates", headers={"Authorization": f"Bearer {other}"}, timeout=WAIT)
            assert r.status_code == 200, r.text
    finally:
        for s in downloads:
            s.close()
        service.stop()


def test_an_api_stream_ends_with_reconnect_after_its_longest_duration(tmp_path):
    service = serve(tmp_path, logs_stream_max_seconds=1, logs_heartbeat_seconds=0.5)
    try:
        assert service.client.post("/v1/templates", json=DEMO).status_code == 201
        job = service.client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
        events = []
        with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT) as c:
            with c.stream("GET", f"/v1/jobs/{job['id']}/logs", params={"follow": "true"}) as r:
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        events.append(line)
        assert events[-1] == "event: reconnect"  # and then the stream closed: a client resumes
    finally:
        service.stop()


def test_a_body_never_takes_longer_than_its_ceiling(tmp_path):
    """100 KB sent at once would earn 100 s; the ceiling cuts it at 2 s all the same."""
    service = serve(tmp_path, http_body_timeout_seconds=1, http_body_max_seconds=2)
    try:
        s = slow_post(service.port, 100_010, b"x" * 100_000)  # ten bytes short of its end
        answer = answer_of(s)
        assert answer.startswith(b"HTTP/1.1 408") and b"TRAINJOBS_HTTP_BODY_MAX_SECONDS" in answer, answer[:300]
        s.close()
    finally:
        service.stop()


def test_ui_streams_without_an_event_stream_accept_hold_no_slot(tmp_path):
    """/ui/stream always streams: asked for without `Accept: text/event-stream` it is still a
    stream (it used to hold a request slot for its whole minute)."""
    from tests.web.test_stopping import ui_cookie

    service = serve(tmp_path, max_concurrent_requests=2, request_queue_seconds=0.2)
    streams = []
    try:
        cookie = ui_cookie(service.url)
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", service.port), timeout=WAIT)
            s.sendall(f"GET /ui/stream HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n\r\n".encode())
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            streams.append(s)
        assert gauge(service, "trainjobs_streams_open") == 4
        for _ in range(10):
            assert service.client.get("/v1/jobs").status_code == 200
    finally:
        for s in streams:
            s.close()
        service.stop()
