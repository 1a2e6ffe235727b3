"""A real HTTP receiver on 127.0.0.1 for webhook tests: it records every request and
answers as told (a status per request in turn, then 200; or holds a request open until
released). Tests wait on its queue: a real signal, no sleeps."""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks

WAIT = 60.0   # generous: a busy 2-core machine


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def verify(self, secret: str) -> dict:
        """The payload, once the Standard Webhooks reference library has checked the signature."""
        return standardwebhooks.Webhook(secret).verify(self.body, self.headers)


class Receiver:
    def __init__(self) -> None:
        self.requests: queue.Queue[Received] = queue.Queue()
        self.answers: list[int | tuple[int, dict]] = []     # statuses (or (status, headers)) to give in turn
        self.hold = threading.Event()                       # set: answer held requests
        self.holding = False
        self.held: queue.Queue[Received] = queue.Queue()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with receiver.lock:
                    answer = receiver.answers.pop(0) if receiver.answers else 200
                    hold = receiver.holding
                if hold:  # kept open, unanswered, until released (its sender may be gone by then)
                    receiver.held.put(got)
                    receiver.hold.wait(WAIT)
                    return
                receiver.requests.put(got)
                status, headers = answer if isinstance(answer, tuple) else (answer, {})
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    reply = b'{"ok": true}' if status < 300 else b"receiver says no"
                    self.send_header("content-length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    pass  # the sender went away (a killed controller)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()

    def next(self, what: str = "a delivery", timeout: float = WAIT) -> Received:
        try:
            return self.requests.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}") from None

    def nothing_more(self) -> bool:
        return self.requests.empty()
