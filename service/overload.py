"""Backpressure: a process serves what it can and answers the rest 503 at once.

Without it, requests beyond the thread pool waited for threads while the requests
holding database connections waited for a thread to commit and close: at ~70
requests in flight everything stalled for the pool timeout and then answered
500s (tests/api/test_overload.py; bench/load.py). So, per process:

- at most TRAINJOBS_MAX_CONCURRENT_REQUESTS ordinary requests run at once; one that
  finds no slot within TRAINJOBS_REQUEST_QUEUE_SECONDS is answered 503 with
  Retry-After, before it touches anything (nothing is stored for it);
- the thread pool and the database pool are sized from that limit (service/db.py,
  app lifespan), so a request that runs never waits for a thread or a connection
  held by another request; a wait for a connection is bounded anyway
  (TRAINJOBS_DB_POOL_TIMEOUT_SECONDS -> 503);
- log streams (SSE) hold no request slot while they stream (a shared reader serves
  them, service/logs/fanout.py); at most TRAINJOBS_MAX_STREAMS at once. Opening one
  (authentication, reading the job: threads and database connections) takes a request
  slot until its response starts, so a thousand followers connecting at once queue for
  slots (up to TRAINJOBS_STREAM_QUEUE_SECONDS) instead of emptying the database pool;
- /healthz, /readyz and /metrics are never queued (readyz uses a pool of its own).

Why this and not an async database layer: every request here is a few short
queries; bounding concurrency and sizing the pools together removes the deadlock
with no rewrite, and measured throughput is bound by CPU (the GIL), not by waiting."""
from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs

MEDIA_TYPE = b"application/problem+json"
EXEMPT = ("/healthz", "/readyz", "/metrics")


def is_stream(scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"accept" and b"text/event-stream" in value:
            return True
    raw = scope.get("query_string", b"")
    if b"follow" not in raw:
        return False
    query = parse_qs(raw.decode("latin-1"))
    return any(v.lower() in ("true", "1", "yes", "on") for v in query.get("follow", []))


class AdmissionMiddleware:
    def __init__(self, app, *, max_requests: int, queue_seconds: float, max_streams: int,
                 stream_queue_seconds: float = 10.0, retry_after: int = 1, on_refuse=None, on_start=None) -> None:
        self.app = app
        self.slots = asyncio.Semaphore(max_requests)
        self.queue_seconds = queue_seconds
        self.stream_queue_seconds = stream_queue_seconds
        self.max_streams = max_streams
        self.streams = 0            # log streams in this process, opening or open (TRAINJOBS_MAX_STREAMS)
        self.streaming = 0          # of them, those whose response has started (the gauge)
        self.in_flight = 0
        self.retry_after = retry_after
        self.on_refuse = on_refuse  # metrics: called with "requests" or "streams"
        if on_start:
            on_start(self)          # metrics: gauges of in_flight and streams

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path", "") in EXEMPT:
            return await self.app(scope, receive, send)
        if is_stream(scope):
            if self.streams >= self.max_streams:
                return await self._refuse(scope, send, "streams", f"this process already serves "
                                          f"{self.max_streams} log streams (TRAINJOBS_MAX_STREAMS)")
            self.streams += 1
            try:
                return await self._stream(scope, receive, send)
            finally:
                self.streams -= 1
        if not await self._slot(self.queue_seconds):
            return await self._refuse(scope, send, "requests", "every request slot of this process is busy "
                                      "(TRAINJOBS_MAX_CONCURRENT_REQUESTS)")
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.slots.release()

    async def _slot(self, seconds: float) -> bool:
        """A request slot, waiting at most `seconds` for one."""
        if not self.slots.locked():
            return await self.slots.acquire()  # free: taken without a timer (wait_for costs one a request)
        try:
            await asyncio.wait_for(self.slots.acquire(), seconds)
        except (asyncio.TimeoutError, TimeoutError):
            return False
        return True

    async def _stream(self, scope, receive, send) -> None:
        """A stream's opening runs in a request slot, given back as its response starts."""
        if not await self._slot(self.stream_queue_seconds):
            return await self._refuse(scope, send, "streams", "every request slot of this process is busy "
                                      "opening other requests or streams (TRAINJOBS_MAX_CONCURRENT_REQUESTS)")
        self.in_flight += 1
        held = True

        def give_back() -> None:
            nonlocal held
            if held:
                held = False
                self.in_flight -= 1
                self.slots.release()

        streaming = False

        async def started(message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                give_back()
                if not streaming:
                    streaming = True
                    self.streaming += 1
            await send(message)
        try:
            await self.app(scope, receive, started)
        finally:
            give_back()
            if streaming:
                self.streaming -= 1

    async def _refuse(self, scope, send, kind: str, why: str) -> None:
        if self.on_refuse:
            self.on_refuse(kind)
        body = json.dumps({"type": "https://trainjobs.dev/problems/overloaded", "title": "Service overloaded",
                           "status": 503, "detail": f"{why}; nothing was done: retry after "
                           f"{self.retry_after} s", "instance": scope.get("path", "")}).encode()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", MEDIA_TYPE), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(self.retry_after).encode())]})
        await send({"type": "http.response.body", "body": body})
