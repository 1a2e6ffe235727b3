"""SIGINT/SIGTERM to `trainjobs serve` (a real process): every open stream (API log
followers, the UI's live feed and log) ends with a `reconnect` event, the process exits
(it used to wait for the followed job to end), local jobs keep running; a second signal
exits at once; no traceback either way."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading

import httpx
import pytest

from tests.backends.localkit import job_processes, kill_all
from tests.servekit import TOKEN, Serve
from tests.waiting import wait_for

WAIT = 30
SLEEPER = {"name": "sleeper", "spec": {"container": {"image_uri": "local", "command": [
    "python", "-c", "import time; print('started', flush=True); time.sleep(600)"]}, "workers": {"replica_count": 1}}}


def open_stream(port: int, path: str, headers: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n{headers}\r\n".encode())
    return s


def read_to_close(s: socket.socket, out: list) -> None:
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError:
        pass
    out.append(data)


def ui_cookie(url: str) -> str:
    with httpx.Client(base_url=url, timeout=WAIT) as c:
        page = c.get("/ui/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        r = c.post("/ui/login", data={"csrf": csrf, "token": TOKEN, "next": "/ui/jobs"}, follow_redirects=False)
        assert r.status_code == 303, r.text
        return f"trainjobs_session={c.cookies['trainjobs_session']}"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_every_stream_and_the_process_jobs_run_on(tmp_path, sig):
    work_dir = tmp_path / "runs"
    service = Serve(tmp_path / "cwd", {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
                                       "TRAINJOBS_LOCAL_WORK_DIR": str(work_dir),
                                       "TRAINJOBS_MAX_STREAMS_PER_CALLER": "100"}).ready()
    sockets: list[socket.socket] = []
    try:
        assert service.client.post("/v1/templates", json=SLEEPER).status_code == 201, \
            service.client.post("/v1/templates", json=SLEEPER).text
        job = service.client.post("/v1/jobs", json={"template": "sleeper"}).json()
        wait_for(lambda: service.client.get(f"/v1/jobs/{job['id']}").json()["state"] == "RUNNING", "RUNNING", 90)
        cookie = ui_cookie(service.url)
        sockets = [open_stream(service.port, f"/v1/jobs/{job['id']}/logs?follow=true",
                               f"Authorization: Bearer {TOKEN}\r\n") for _ in range(40)]
        sockets += [open_stream(service.port, "/ui/stream", f"Cookie: {cookie}\r\n") for _ in range(5)]
        sockets += [open_stream(service.port, f"/ui/jobs/{job['id']}/logs/stream", f"Cookie: {cookie}\r\n")
                    for _ in range(5)]
        wait_for(lambda: "trainjobs_streams_open 50.0" in httpx.get(service.url + "/metrics").text,
                   "fifty streams open", WAIT)
        replicas = job_processes(work_dir, job["id"])
        assert replicas
        out: list[bytes] = []
        readers = [threading.Thread(target=read_to_close, args=(s, out)) for s in sockets]
        for t in readers:
            t.start()
        service.proc.send_signal(sig)
        # Exits by itself (not after the job's 600 s; a bound for a broken test, not a speed test).
        assert service.proc.wait(WAIT) == (130 if sig == signal.SIGINT else 0)
        for t in readers:
            t.join(WAIT)
        assert len(out) == 50
        assert all(b"event: reconnect" in data for data in out), [d[-300:] for d in out if b"reconnect" not in d]
        assert all(p.is_running() for p in replicas)  # the job runs on
    finally:
        for s in sockets:
            s.close()
        service.stop()
        kill_all(work_dir)
    log = service.log()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    # Issue 37: the stop line says the seconds, and a normal stop is no warning (the log is at
    # WARNING here: the controller's step-down is INFO now).
    assert "requests get 3 s to finish (TRAINJOBS_SHUTDOWN_GRACE_SECONDS)" in log, log[-3000:]
    assert "stopped being the controller" not in log, log[-3000:]


def test_a_second_signal_exits_at_once(tmp_path):
    service = Serve(tmp_path / "cwd", {"TRAINJOBS_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
                                       "TRAINJOBS_SHUTDOWN_GRACE_SECONDS": "600",
                                       "TRAINJOBS_HTTP_BODY_TIMEOUT_SECONDS": "600"}).ready()
    s = socket.create_connection(("127.0.0.1", service.port), timeout=WAIT)
    try:
        # A request still running (its body trickles): the first signal waits for it.
        s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        wait_for(lambda: "trainjobs_request_bodies_reading 1.0" in httpx.get(service.url + "/metrics").text,
                   "the body being read", WAIT)
        service.proc.send_signal(signal.SIGINT)
        wait_for(lambda: "signal again to exit at once" in service.log(), "the first signal taken", WAIT)
        with pytest.raises(subprocess.TimeoutExpired):
            service.proc.wait(0.5)  # still waiting for the request, as told
        service.proc.send_signal(signal.SIGINT)
        assert service.proc.wait(WAIT) == 130
    finally:
        s.close()
        service.stop()
    log = service.log()
    assert "second signal: exiting now" in log
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
