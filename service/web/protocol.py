"""uvicorn's httptools protocol with limits on the request head.

Plain uvicorn (httptools) buffers a request line and headers of any size, for as
long as the client takes to send them, and never times out a connection that has
not sent a first request. Here a head longer than TRAINJOBS_HTTP_MAX_HEADER_BYTES
or with more than TRAINJOBS_HTTP_MAX_HEADERS fields answers 431, and one that has
not arrived TRAINJOBS_HTTP_HEADER_TIMEOUT_SECONDS after its first byte (or after
the connection opened) answers 408; either way the connection is closed.

Stopping: uvicorn asks each connection to shut down as the server begins to stop; a
connection here also sets the app's STOPPING event (in the lifespan state), so the
app's streams end at once with a `reconnect` event instead of holding the exit until
their job ends (service/app.py, service/logs/fanout.py, service/ui/routes_live.py).

`uvicorn_options(settings)` is what every `uvicorn.run` of the service passes."""
from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.web.problem_types import type_uri
from service.web.settings import WebEnv

STOPPING = "trainjobs.stopping"  # the lifespan state's key of the app's asyncio.Event
_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


@dataclass(frozen=True)
class HeaderLimits:
    max_bytes: int
    max_count: int
    timeout: float

    @classmethod
    def of(cls, settings: WebEnv) -> HeaderLimits:
        return cls(settings.http_max_header_bytes, settings.http_max_headers, settings.http_header_timeout_seconds)


@functools.lru_cache(maxsize=1)
def _environment_limits() -> HeaderLimits:
    """A worker of `serve --workers N` gets this class by name from uvicorn, with no settings
    handed to it: its limits are the web section's, read from the environment once per process."""
    return HeaderLimits.of(WebEnv())


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    # None: read from the TRAINJOBS_* environment (each worker of `serve --workers N`
    # builds its own); protocol_for() makes a subclass with explicit limits.
    limits: HeaderLimits | None = None

    def __init__(self, config, server_state, app_state, _loop=None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._limits = self.limits or _environment_limits()
        self._in_head = True      # the next bytes parsed belong to a request line or headers
        self._raw_in_head = 0     # bytes received since the current head began (bounds the parser's buffer)
        self._head_bytes = 0      # url and header fields of the current head, as parsed
        self._head_count = 0
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None

    # -- the connection ------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            if self._head_timer is None:
                self._arm()
            self._raw_in_head += len(data)
        super().data_received(data)
        if self._in_head and not self._refused and self._raw_in_head > self._limits.max_bytes:
            self._refuse(431, f"the request line and headers exceed {self._limits.max_bytes} bytes")

    def shutdown(self) -> None:
        stopping = (self.app_state or {}).get(STOPPING)
        if stopping is not None and not stopping.is_set():
            stopping.set()  # the first connection told: every stream of the app ends now
        super().shutdown()

    # -- parser callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._head_bytes = self._head_count = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        if self._refused:
            return
        self._head_bytes += len(url)
        if self._head_bytes > self._limits.max_bytes:
            return self._refuse(431, f"the request line and headers exceed {self._limits.max_bytes} bytes")
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refused:
            return
        self._head_count += 1
        self._head_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self._head_count > self._limits.max_count:
            return self._refuse(431, f"more than {self._limits.max_count} header fields")
        if self._head_bytes > self._limits.max_bytes:
            return self._refuse(431, f"the request line and headers exceed {self._limits.max_bytes} bytes")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        self._in_head = False
        self._disarm()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        super().on_message_complete()
        self._in_head, self._raw_in_head = True, 0

    # -- limits --------------------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self._limits.timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self._refused or self.transport is None or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm()  # still answering the previous request; its successor's head can wait
            return
        if self._raw_in_head == 0:
            self._refused = True
            self.transport.close()  # nothing asked, nothing to answer
            return
        self._refuse(408, f"the request line and headers did not arrive within {self._limits.timeout:g} seconds")

    def _refuse(self, status: int, detail: str) -> None:
        self._refused = True
        self._disarm()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # a response is under way: a second one would corrupt it
            return
        slug = "request-timeout" if status == 408 else "headers-too-large"
        body = json.dumps({"type": type_uri(slug), "title": _REASONS[status].decode(),
                           "status": status,
                           "detail": detail + "; send a smaller request head, promptly"}).encode()
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/problem+json\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n" % (status, _REASONS[status], len(body))
                             + body)
        self.transport.close()


def protocol_for(settings: WebEnv) -> type[LimitedHttpToolsProtocol]:
    """The protocol with these settings' limits (for a server built in this process)."""
    return type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": HeaderLimits.of(settings)})


def uvicorn_options(settings: WebEnv, *, workers: int = 1) -> dict:
    """The uvicorn.run keyword arguments that carry the limits. Several workers are
    separate processes: they get the module's class, which reads the environment."""
    return {"http": protocol_for(settings) if workers == 1 else f"{__name__}:LimitedHttpToolsProtocol",
            # The same bound if someone runs the service with uvicorn's h11 parser instead.
            "h11_max_incomplete_event_size": settings.http_max_header_bytes,
            # Streams end at once when stopping; a request still running gets this long.
            "timeout_graceful_shutdown": settings.shutdown_grace_seconds}


class Server(uvicorn.Server):
    """uvicorn's server as `trainjobs serve` runs it. The first SIGINT/SIGTERM stops it
    gracefully (streams end with `reconnect` at once, see LimitedHttpToolsProtocol.shutdown;
    requests get TRAINJOBS_SHUTDOWN_GRACE_SECONDS); a second one exits at once, with one line
    and no traceback (jobs run on: local replicas live in sessions of their own). The signal
    is not raised again after a graceful stop (uvicorn does, which printed a
    KeyboardInterrupt traceback): `signal_received` says which one came."""

    signal_received: int | None = None
    # Called with the bound (host, port) once listening: `serve` prints its URLs then.
    on_started: Callable[[tuple[str, int]], None] | None = None

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None and self.servers and self.servers[0].sockets:
            self.on_started(self.servers[0].sockets[0].getsockname()[:2])

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame) -> None:
        if self.should_exit:
            os.write(2, b"trainjobs: second signal: exiting now (jobs keep running)\n")
            os._exit(128 + sig)
        self.signal_received = sig
        grace = self.config.timeout_graceful_shutdown
        within = f"requests get {grace:g} s to finish" if grace is not None else "requests may finish"
        os.write(2, f"trainjobs: stopping: streams end now, {within} (TRAINJOBS_SHUTDOWN_GRACE_SECONDS); "
                    "signal again to exit at once\n".encode())
        self.should_exit = True
