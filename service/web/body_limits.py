"""Request bodies: read whole, bounded in size, time and memory, before anything else runs.

This middleware sits outside admission (service/web/overload.py): a request asks for a
request slot only once its body is here. A client that declares `Content-Length: 100000`
and then sends a byte now and then holds a connection and nothing else, and is cut:

- size: more than TRAINJOBS_MAX_BODY_BYTES is 413 (with Content-Length at once; a chunked
  body as it passes the limit);
- time: the body must arrive within TRAINJOBS_HTTP_BODY_TIMEOUT_SECONDS of the head, plus
  one second per TRAINJOBS_HTTP_BODY_MIN_BYTES_PER_SECOND bytes received, and never later
  than TRAINJOBS_HTTP_BODY_MAX_SECONDS (Apache's mod_reqtimeout rule: an honest slow upload
  earns its time, a trickle does not); else 408 and the connection closes;
- memory: the bodies being read or served by this process hold at most
  TRAINJOBS_HTTP_BODY_BUFFER_BYTES together, counted as bytes arrive (a declared length
  costs nothing until it is sent); past it the request is 503 with Retry-After.

A client that goes away mid-body leaves one INFO line (the access log, status 499) and
no traceback: nobody is left to answer, and no route ever sees a half body."""
from __future__ import annotations

import asyncio
import json
import time

from service.web.problem_types import type_uri

MEDIA_TYPE = b"application/problem+json"
CLIENT_GONE = "trainjobs.client_gone"  # set in the scope: the access log says 499 (observability.py)


class BodyBudget:
    """Bytes of request bodies this process holds (TRAINJOBS_HTTP_BODY_BUFFER_BYTES)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self.reading = 0  # bodies being received now (they hold no request slot)

    def take(self, n: int) -> bool:
        if self.held + n > self.max_bytes:
            return False
        self.held += n
        return True

    def give(self, n: int) -> None:
        self.held -= n


class BodySizeLimitMiddleware:
    def __init__(self, app, max_bytes: int, *, timeout: float = 10.0, min_rate: float = 1024.0,
                 buffer_bytes: int = 64 << 20, max_seconds: float = 60.0, on_start=None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_seconds = max_seconds
        self.min_rate = min_rate
        self.budget = BodyBudget(buffer_bytes)
        if on_start:
            on_start(self.budget)  # metrics: gauges of bodies being read and bytes held

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = scope["headers"]
        declared = next((v for k, v in headers if k == b"content-length"), None)
        chunked = any(k == b"transfer-encoding" for k, _ in headers)
        size = None
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = None  # the HTTP server refuses a malformed Content-Length itself
            if size is not None and size > self.max_bytes:
                return await self._answer(scope, send, 413, "body-too-large", "Body too large",
                                          f"request bodies are limited to {self.max_bytes} bytes; "
                                          "send a smaller document")
        if not chunked and not size:
            return await self.app(scope, receive, send)  # no body at all
        # Bytes are taken from the budget as they arrive, not as declared: a client that
        # declares a megabyte and sends nothing holds nothing.
        held = [0]
        try:
            self.budget.reading += 1
            try:
                body = await self._read(scope, send, receive, held)
            finally:
                self.budget.reading -= 1
            if body is None:
                return
            buffered: dict[str, object] | None = {"type": "http.request", "body": body, "more_body": False}

            async def replay():
                nonlocal buffered
                if buffered is not None:
                    message, buffered = buffered, None
                    return message
                return await receive()  # later calls wait for the disconnect, as usual

            await self.app(scope, replay, send)
        finally:
            self.budget.give(held[0])

    async def _read(self, scope, send, receive, held: list[int]) -> bytes | None:
        """The whole body, or None once answered (413, 408, 503) or the client is gone.
        `held[0]`: bytes taken from the budget for it, grown as the body comes."""
        chunks, size = [], 0
        started = time.monotonic()
        while True:
            left = min(started + self.timeout + size / self.min_rate, started + self.max_seconds) - time.monotonic()
            message = None
            if left > 0:
                # asyncio.timeout, not wait_for: wait_for runs receive() as a task of its own
                # (a task, two futures and a loop turn on every request with a body).
                try:
                    async with asyncio.timeout(left):
                        message = await receive()
                except TimeoutError:
                    message = None
            if message is None:
                await self._answer(scope, send, 408, "body-timeout", "Request Timeout",
                                   f"the body did not arrive in time: {size} bytes in "
                                   f"{time.monotonic() - started:.1f} s (a body gets "
                                   f"{self.timeout:g} s plus 1 s per {self.min_rate:g} bytes "
                                   f"received, {self.max_seconds:g} s at most: TRAINJOBS_HTTP_BODY_TIMEOUT_SECONDS, "
                                   "TRAINJOBS_HTTP_BODY_MIN_BYTES_PER_SECOND, TRAINJOBS_HTTP_BODY_MAX_SECONDS); "
                                   "send it promptly")
                return None
            if message["type"] != "http.request":
                scope[CLIENT_GONE] = True  # mid-body: nobody to answer
                return None
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._answer(scope, send, 413, "body-too-large", "Body too large",
                                   f"request bodies are limited to {self.max_bytes} bytes; "
                                   "send a smaller document")
                return None
            if size > held[0]:
                if not self.budget.take(size - held[0]):
                    await self._busy(scope, send)
                    return None
                held[0] = size
            chunks.append(body)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _busy(self, scope, send) -> None:
        await self._answer(scope, send, 503, "overloaded", "Service overloaded",
                           f"this process already holds {self.budget.max_bytes} bytes of request bodies "
                           "(TRAINJOBS_HTTP_BODY_BUFFER_BYTES); nothing was done: retry after 1 s",
                           retry_after=True)

    async def _answer(self, scope, send, status: int, slug: str, title: str, detail: str,
                      retry_after: bool = False) -> None:
        body = json.dumps({"type": type_uri(slug, scope.get("root_path", "")), "title": title, "status": status,
                           "detail": detail, "instance": scope.get("path", "")}).encode()
        headers = [(b"content-type", MEDIA_TYPE), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        if retry_after:
            headers.append((b"retry-after", b"1"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
