"""Backpressure: a process serves what it can and answers the rest 503 at once.

Without it, requests beyond the thread pool waited for threads while the requests
holding database connections waited for a thread to commit and close: at ~70
requests in flight everything stalled for the pool timeout and then answered
500s (tests/web/test_overload.py; bench/load.py). So, per process:

- at most TRAINJOBS_MAX_CONCURRENT_REQUESTS ordinary requests run at once; one that
  finds no slot within TRAINJOBS_REQUEST_QUEUE_SECONDS is answered 503 with
  Retry-After, before it touches anything (nothing is stored for it);
- a request's body is read before it asks for a slot (service/web/body_limits.py, the middleware
  outside this one), under a deadline and a minimum rate: a client that trickles a body
  holds a connection, never a slot, so slow anonymous clients cannot starve the rest;
- the thread pool and the database pool are sized from that limit (service/persistence/session.py,
  app lifespan), so a request that runs never waits for a thread or a connection
  held by another request; a wait for a connection is bounded anyway
  (TRAINJOBS_DB_POOL_TIMEOUT_SECONDS -> 503);
- streams (SSE: a job's log followed, the UI's live feed and log; and the UI's log download,
  a file sent as fast as its reader takes it) hold no request slot
  while they stream (a shared reader serves them, service/logs/fanout.py); at most
  TRAINJOBS_MAX_STREAMS at once, TRAINJOBS_MAX_STREAMS_PER_CALLER of them for one
  credential. Opening one (authentication, reading the job: threads and database
  connections) takes a request slot until its response starts, so a thousand followers
  connecting at once queue for slots (up to TRAINJOBS_STREAM_QUEUE_SECONDS) instead of
  emptying the database pool; one refused then is told by Retry-After when the streams
  ahead of it will have opened (stream_retry_after), so they come back in turn;
- /healthz, /readyz and /metrics are never queued (readyz uses a pool of its own).

What is a stream is decided once, here (`stream_kind`), from the value the route itself
parses (pydantic's bool for `follow`): the logs route asks the same function.

Why this and not an async database layer: every request here is a few short
queries; bounding concurrency and sizing the pools together removes the deadlock
with no rewrite, and measured throughput is bound by CPU (the GIL), not by waiting."""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
import time
from urllib.parse import parse_qs

from pydantic import TypeAdapter, ValidationError
from starlette.requests import HTTPConnection

from service.core.credentials import bearer_secret
from service.core.off_seat import HOOK
from service.web.problem_types import type_uri
from service.web.seats import FairSeats, Ticket

MEDIA_TYPE = b"application/problem+json"
EXEMPT = ("/healthz", "/readyz", "/metrics")
LEARN = "trainjobs.seat_learn"   # scope["state"][LEARN](team): the route's caller belongs to `team`
UI_SESSION_COOKIE = "trainjobs_session"  # service.ui.sessions.SESSION_COOKIE (a layer above: not imported)

# Routes that always stream (the UI's event streams and its log download; the API docs' assets,
# Swagger's 1.5 MB bundle sent in 64 KiB chunks to anyone), and the API route that streams when
# asked to. A response that sends a file as its reader takes it is a stream: an unread download
# held a request slot until its last byte (40 of them answered every other team 503). The UI's
# own static files fit in one chunk: sent whole at once, they hold nothing.
_ALWAYS = re.compile(r"^/ui/stream$|^/ui/jobs/[^/]+/logs/stream$|^/ui/jobs/[^/]+/logs\.txt$|^/docs-assets/")
_ON_REQUEST = re.compile(r"^/v1/jobs/[^/]+/logs$")
_BOOL = TypeAdapter(bool)  # what FastAPI makes of `follow: bool` on the route


def parses_true(value: str) -> bool:
    """`follow=<value>` as the route reads it (pydantic: y, yes, on, t, true, 1, ...)."""
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return False  # the route answers 422 to it: an ordinary request


def wants_stream(follow: bool, accept: str | None) -> bool:
    """The logs route's rule: a stream with `follow` true or `Accept: text/event-stream`."""
    return follow or "text/event-stream" in (accept or "")


def stream_kind(scope) -> bool:
    """True if this request is a stream (the one rule; see the module's docstring)."""
    path = scope.get("path", "")
    if _ALWAYS.match(path):
        return True
    if scope.get("method") != "GET" or not _ON_REQUEST.match(path):
        return False
    accept = b", ".join(v for k, v in scope.get("headers", ()) if k == b"accept").decode("latin-1")
    follow = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True).get("follow", [])
    # FastAPI reads the last value of a repeated scalar query parameter.
    return wants_stream(bool(follow) and parses_true(follow[-1]), accept)


def learn_team(request, team: str) -> None:
    """The route authenticated its caller as a member of `team` (by id): its credential's next
    requests take the team's turn (service/web/seats.py)."""
    learn = request.scope.get("state", {}).get(LEARN)
    if learn is not None:
        learn(team)


def caller_of(scope) -> bytes:
    """Who a stream counts against (TRAINJOBS_MAX_STREAMS_PER_CALLER): the credential its route
    authenticates with, read as the route reads it, hashed. The UI's routes sign in by the
    session cookie alone (Starlette's cookie parser, every Cookie header, the last value
    winning); every other route by the bearer token alone (the one parser,
    service.core.credentials). Nothing else in the request counts: a made-up cookie beside a
    real bearer token, or a made-up token beside a real session, used to open a fresh quota
    each time. Not yet checked (the route does that), so a made-up credential only fills its
    own quota until the route refuses it."""
    conn = HTTPConnection(scope)
    if scope.get("path", "").startswith("/ui/"):
        key = "ui\0" + conn.cookies.get(UI_SESSION_COOKIE, "")
    else:
        key = "bearer\0" + (bearer_secret(conn.headers.get("authorization")) or "")
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class _Seat:
    """The seat a request holds, given back while its route waits elsewhere (core/off_seat.py)
    and taken again, in its team's turn, after. give_back and take_again are the hook, called from
    the route's thread; the seats are the loop's alone, so each runs there."""

    def __init__(self, mw: AdmissionMiddleware, caller: bytes, ticket: Ticket, loop) -> None:
        self.mw, self.caller, self.loop = mw, caller, loop
        self.ticket: Ticket | None = ticket
        self.since = time.monotonic()
        self.loop_thread = threading.get_ident()
        self.away = False

    def off(self) -> None:          # on the loop
        if self.ticket is not None:
            self.mw.in_flight -= 1
            self.mw.seats.release(self.ticket, time.monotonic() - self.since)
            self.ticket = None

    async def _leave(self) -> bool:
        if self.ticket is None or self.mw.elsewhere >= self.mw.max_elsewhere:
            return False        # past TRAINJOBS_MAX_REQUESTS_WAITING_ELSEWHERE it waits in its seat
        self.mw.elsewhere += 1
        self.off()
        return True

    async def _return(self) -> None:
        self.mw.elsewhere -= 1
        # It waits its turn however long (seats always come free: every request ends); a wait
        # past an hour goes on without a seat rather than fail work done.
        ticket = await self.mw.seats.acquire(self.caller, 3600.0)
        if ticket is not None:
            self.ticket, self.since = ticket, time.monotonic()
            self.mw.in_flight += 1

    def give_back(self) -> None:
        if threading.get_ident() != self.loop_thread:   # the loop's own thread must not block
            self.away = asyncio.run_coroutine_threadsafe(self._leave(), self.loop).result()

    def take_again(self) -> None:
        if self.away:
            self.away = False
            asyncio.run_coroutine_threadsafe(self._return(), self.loop).result()


class AdmissionMiddleware:
    def __init__(self, app, *, max_requests: int, queue_seconds: float, max_streams: int, max_elsewhere: int = 8,
                 remember_credentials: int = 10_000,
                 stream_queue_seconds: float = 30.0, max_streams_per_caller: int = 1000, retry_after: int = 1,
                 on_refuse=None, on_start=None, on_streams=None) -> None:
        self.app = app
        self.seats = FairSeats(max_requests, remember_credentials)   # fairly between teams (service/web/seats.py)
        self.max_elsewhere = max_elsewhere     # requests waiting elsewhere without their seat, at most
        self.elsewhere = 0
        self.queue_seconds = queue_seconds
        self.stream_queue_seconds = stream_queue_seconds
        self.max_streams = max_streams
        self.max_per_caller = max_streams_per_caller
        self.streams = 0            # log streams in this process, opening or open (TRAINJOBS_MAX_STREAMS)
        self.by_caller: dict[bytes, int] = {}  # of them, per credential
        self.streaming = 0          # of them, those whose response has started (the gauge)
        self.waiting = 0            # of them, those waiting for a request slot to open in
        # Seconds a stream's opening holds its slot (a moving average): with `waiting` and the
        # slots, when a stream refused now would find one free (its Retry-After).
        self.open_seconds = 0.01
        self.max_requests = max_requests
        self.in_flight = 0
        self.retry_after = retry_after
        self.on_refuse = on_refuse  # metrics: called with "requests" or "streams"
        self.on_streams = on_streams  # called with `streams` when it changes (service/web/gil.py)
        if on_start:
            on_start(self)          # metrics: gauges of in_flight and streams

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path", "") in EXEMPT:
            return await self.app(scope, receive, send)
        if stream_kind(scope):
            if self.streams >= self.max_streams:
                return await self._refuse(scope, send, "streams", f"this process already serves "
                                          f"{self.max_streams} streams (TRAINJOBS_MAX_STREAMS)")
            caller = self._caller(scope)
            if self.by_caller.get(caller, 0) >= self.max_per_caller:
                return await self._refuse(scope, send, "caller", f"this credential already has "
                                          f"{self.max_per_caller} streams open here "
                                          "(TRAINJOBS_MAX_STREAMS_PER_CALLER); close one", status=429)
            self.streams += 1
            self.by_caller[caller] = self.by_caller.get(caller, 0) + 1
            if self.on_streams:
                self.on_streams(self.streams)
            try:
                return await self._stream(scope, receive, send, caller)
            finally:
                self.streams -= 1
                if self.on_streams:
                    self.on_streams(self.streams)
                left = self.by_caller.pop(caller) - 1
                if left:
                    self.by_caller[caller] = left
        caller = self._caller(scope)
        ticket = await self.seats.acquire(caller, self.queue_seconds)
        if ticket is None:
            return await self._refuse(scope, send, "requests", "every request slot of this process is busy "
                                      "(TRAINJOBS_MAX_CONCURRENT_REQUESTS)")
        self.in_flight += 1
        seat = _Seat(self, caller, ticket, asyncio.get_running_loop())
        hook = HOOK.set((seat.give_back, seat.take_again))
        try:
            await self.app(scope, receive, send)
        finally:
            HOOK.reset(hook)
            seat.off()

    def _caller(self, scope) -> bytes:
        """Whose turn a request takes (caller_of), and the hook by which its route, once it has
        authenticated the caller, ties the credential to its team (auth/deps.py: learn_team)."""
        caller = caller_of(scope)
        seats, loop = self.seats, asyncio.get_running_loop()

        def learn(team: str) -> None:   # from the route's thread too: the seats are the loop's alone
            if not seats.knows(caller, team):
                loop.call_soon_threadsafe(seats.learn, caller, team)
        scope.setdefault("state", {})[LEARN] = learn
        return caller

    def stream_retry_after(self) -> int:
        """When a stream refused now should come back (whole seconds, 1 to 60): the streams
        waiting ahead of it, opened `max_requests` at a time at the measured pace, spread
        over twice that so that thousands refused together do not all return in one second."""
        ahead = self.waiting * self.open_seconds / self.max_requests
        return max(self.retry_after, min(60, math.ceil(2 * ahead)))

    async def _stream(self, scope, receive, send, caller: bytes) -> None:
        """A stream's opening runs in a request slot, given back as its response starts."""
        self.waiting += 1
        try:
            ticket: Ticket | None = await self.seats.acquire(caller, self.stream_queue_seconds)
        finally:
            self.waiting -= 1
        if ticket is None:
            return await self._refuse(scope, send, "streams", "every request slot of this process is busy "
                                      "opening other requests or streams (TRAINJOBS_MAX_CONCURRENT_REQUESTS)",
                                      retry_after=self.stream_retry_after())
        self.in_flight += 1
        held = True
        began = time.monotonic()

        def give_back() -> None:
            nonlocal held
            if held:
                held = False
                self.in_flight -= 1
                took = time.monotonic() - began
                self.seats.release(ticket, took)
                self.open_seconds += (took - self.open_seconds) / 32

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

    async def _refuse(self, scope, send, kind: str, why: str, status: int = 503,
                      retry_after: int | None = None) -> None:
        retry = self.retry_after if retry_after is None else retry_after
        if self.on_refuse:
            self.on_refuse(kind)
        title = "Service overloaded" if status == 503 else "Too many streams"
        slug = "overloaded" if status == 503 else "too-many-streams"
        body = json.dumps({"type": type_uri(slug, scope.get("root_path", "")), "title": title,
                           "status": status, "detail": f"{why}; nothing was done: retry after "
                           f"{retry} s", "instance": scope.get("path", "")}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", MEDIA_TYPE), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(retry).encode())]})
        await send({"type": "http.response.body", "body": body})
