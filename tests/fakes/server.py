"""A real HTTP server on 127.0.0.1 in a thread, for the fakes of Google's APIs.

The real client libraries talk to it over a socket, so everything they put on
the wire (paths, query parameters, JSON bodies, `$alt=json;enum-encoding=int`)
reaches the fake exactly as it would reach Google."""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

# google.rpc.Code names for the HTTP statuses the fakes answer with.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
    501: "NOT_IMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> dict:
        return json.loads(self.body or b"{}")


class GoogleError(Exception):
    """An error answer in Google's JSON shape: {"error": {code, message, status, details}}."""

    def __init__(self, code: int, message: str, status: str | None = None, details: list | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or STATUS_NAMES.get(code, "UNKNOWN")
        self.details = details or []

    def body(self) -> dict:
        err = {"code": self.code, "message": self.message, "status": self.status}
        if self.details:
            err["details"] = self.details
        return {"error": err}


Handler = Callable[[Request], tuple[int, dict]]


class FakeServer:
    """Serves `handler(Request) -> (status, json)` on an ephemeral port."""

    def __init__(self, handler: Handler):
        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect
            disable_nagle_algorithm = True  # headers and body go out at once: no 40 ms delayed-ACK stalls

            def _serve(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(self.command, parts.path, dict(parse_qsl(parts.query, keep_blank_values=True)),
                              body, {k.lower(): v for k, v in self.headers.items()})
                try:
                    status, payload = handler(req)
                except GoogleError as e:
                    status, payload = e.code, e.body()
                except Exception as e:  # a bug in the fake must show, not hang the client
                    status, payload = 500, GoogleError(500, f"fake crashed: {type(e).__name__}: {e}").body()
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _serve

            def log_message(self, *args):  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(5)

