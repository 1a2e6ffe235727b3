"""Request-head limits on a real uvicorn server (the protocol `trainjobs serve` uses):
size and field count (431), read timeout (408), idle connections closed, and a
flood of 16 MiB headers neither answered nor buffered. Raw sockets, because an
HTTP client would refuse to send most of this."""
import socket
import threading
from urllib.parse import urlparse

import psutil
import pytest

from tests.conftest import ONE_DATABASE, bearer
from tests.waiting import wait_for

pytestmark = ONE_DATABASE

MAX_BYTES, MAX_HEADERS, TIMEOUT = 8192, 20, 0.5
WAIT = 20  # seconds a socket waits for the server's answer before the test fails: never reached when it works


@pytest.fixture
def settings(settings):
    settings.http_max_header_bytes = MAX_BYTES
    settings.http_max_headers = MAX_HEADERS
    settings.http_header_timeout_seconds = TIMEOUT
    return settings


@pytest.fixture
def addr(live_server):
    u = urlparse(live_server)
    return u.hostname, u.port


def connect(addr) -> socket.socket:
    s = socket.create_connection(addr, timeout=WAIT)
    return s


def read_all(s: socket.socket) -> bytes:
    """Everything until the server closes (a reset after its answer counts as closed)."""
    out = b""
    while True:
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            return out
        if not data:
            return out
        out += data


def head(*lines: str, method="GET", path="/healthz") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: test\r\n" + "".join(f"{ln}\r\n" for ln in lines) + "\r\n").encode()


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_an_ordinary_request_and_keep_alive_work(addr):
    with connect(addr) as s:
        for _ in range(2):
            s.sendall(head(*(f"X-Field-{i}: {i}" for i in range(MAX_HEADERS - 2))))
            answer = s.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer


def test_a_head_over_the_byte_limit_is_431(addr):
    with connect(addr) as s:
        s.sendall(head("X-Big: " + "a" * (MAX_BYTES + 100)))
        answer = read_all(s)
    assert status_of(answer) == 431, answer
    assert b"application/problem+json" in answer and f"exceed {MAX_BYTES} bytes".encode() in answer


def test_an_unfinished_head_over_the_byte_limit_is_431(addr):
    with connect(addr) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * (2 * MAX_BYTES))  # never ends
        answer = read_all(s)
    assert status_of(answer) == 431, answer


def test_too_many_header_fields_is_431(addr):
    with connect(addr) as s:
        s.sendall(head(*(f"X-Field-{i}: {i}" for i in range(MAX_HEADERS + 5))))
        answer = read_all(s)
    assert status_of(answer) == 431 and f"more than {MAX_HEADERS} header fields".encode() in answer


def test_a_head_that_stalls_is_408_and_closed(addr):
    with connect(addr) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: ")  # and nothing more
        answer = read_all(s)
    assert status_of(answer) == 408 and b"did not arrive within 0.5 seconds" in answer


def test_a_connection_that_never_asks_is_closed(addr):
    with connect(addr) as s:
        assert read_all(s) == b""  # plain uvicorn would keep it open for ever


def test_the_head_timeout_does_not_cut_a_slow_body(addr, tokens):
    """A body that arrives after the head timeout is still read: the timeout is for heads only."""
    body = b'{"name": "timeout-test-token", "role": "viewer"}'
    auth = bearer(tokens["admin"])["Authorization"]
    with connect(addr) as slow, connect(addr) as stalled:
        slow.sendall(head(f"Authorization: {auth}", "Content-Type: application/json",
                          f"Content-Length: {len(body)}", method="POST", path="/v1/tokens") + body[:10])
        # The real signal that the timeout has passed since: a later connection's head timing out.
        stalled.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert status_of(read_all(stalled)) == 408
        slow.sendall(body[10:])
        answer = slow.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201"), answer


def test_a_flood_of_16_mib_headers_is_cut_short(addr):
    """20 connections each sending a 16 MiB header: each is refused after about the limit,
    none waits for the rest, and the server's memory does not grow by the 320 MiB sent."""
    payload = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * (16 << 20)
    me = psutil.Process()
    before = me.memory_info().rss
    ended = []

    def attack():
        with connect(addr) as s:
            try:
                s.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server stopped reading: what it should do
            answer = read_all(s)
            ended.append(answer[:12])

    threads = [threading.Thread(target=attack) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 2)
    assert len(ended) == 20  # every connection was closed by the server, none left waiting
    assert all(a in (b"", b"HTTP/1.1 431") for a in ended), ended
    grew = me.memory_info().rss - before
    print(f"RSS growth during the flood: {grew / 2**20:.1f} MiB")
    assert grew < 64 << 20
    with connect(addr) as s:  # and it still serves
        s.sendall(head())
        assert s.recv(65536).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("workers", [1, 2])
def test_trainjobs_serve_applies_the_limits(tmp_path, workers):
    """The limits reach every worker `trainjobs serve` starts (the settings come from the environment)."""
    import os
    import signal
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "TRAINJOBS_LOCAL_WORK_DIR": str(tmp_path / "runs"), "TRAINJOBS_SEED_DEMO_TEMPLATE": "false",
           "TRAINJOBS_CONTROLLER_LOCK_PATH": str(tmp_path / "controller.lock"), "TRAINJOBS_LOG_FORMAT": "text",
           "TRAINJOBS_HTTP_MAX_HEADERS": "10", "TRAINJOBS_HTTP_HEADER_TIMEOUT_SECONDS": "0.5",
           "TRAINJOBS_METRICS_TOKEN": "ops-secret"}  # /readyz shows the pid to the operator only
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(port),
                                 "--workers", str(workers)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=tmp_path, start_new_session=True)
    try:
        def answers() -> bool:  # the signal that it is up
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
                    s.sendall(head())
                    return s.recv(65536).startswith(b"HTTP/1.1 200")
            except OSError:
                return False
        wait_for(answers, "serve to answer", 90, 0.2)
        # One worker answering is not all of them up: each logs when its start-up is done. (Probing
        # from the first answer, a second worker still importing under load missed all 40 rounds
        # of connections: a fresh-clone run failed so.)
        wait_for(lambda: (tmp_path / "serve.log").read_text().count("Application startup complete") >= workers,
                 f"all {workers} workers started", 90, 0.2)
        pids = set()
        for _ in range(100 if workers > 1 else 1):  # new connections spread over the workers
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
                s.sendall(head(*(f"X-Field-{i}: {i}" for i in range(12)), path="/readyz"))
                assert status_of(read_all(s)) == 431
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
                s.sendall(b"GET /readyz HTTP/1.1\r\n")
                assert status_of(read_all(s)) == 408
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
                s.sendall(head("Authorization: Bearer ops-secret", path="/readyz"))
                pids.add(read_all_json_pid(s))
            if len(pids) == workers:
                break
        assert len(pids) == workers  # every worker was asked, and refused both
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def read_all_json_pid(s: socket.socket) -> int:
    import json
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        assert chunk, answer
        answer += chunk
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])["pid"]
