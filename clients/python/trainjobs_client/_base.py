"""What the sync and async clients share: configuration, headers, the retry
rules, turning error answers into exceptions, and reading a followed log."""
from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from trainjobs_client import __version__
from trainjobs_client._ops import Call
from trainjobs_client.config import Config, resolve
from trainjobs_client.errors import ApiError, ConfigError, ConnectionFailed, Unauthorized, from_response
from trainjobs_client.models import LogEnd, LogLine
from trainjobs_client.sse import Decoder, Event

MAX_DELAY = 8.0  # seconds between two attempts, at most
MAX_RETRY_AFTER = 30.0
# Followers (a followed log, wait()) ride out a restart or an outage of the service for this
# long, retrying with backoff, before they give up (ConnectionFailed).
RECONNECT_ENV = "TRAINJOBS_RECONNECT_SECONDS"
DEFAULT_RECONNECT_SECONDS = 300.0
MAX_RECONNECT_SECONDS = 86400.0


@dataclass(frozen=True)
class Options:
    config: Config
    timeout: float
    retries: int
    backoff: float
    reconnect_for: float = DEFAULT_RECONNECT_SECONDS


def options(url: str | None, token: str | None, timeout: float, retries: int, backoff: float,
            reconnect_for: float | None = None) -> Options:
    if retries < 0 or backoff < 0 or timeout <= 0:
        raise ValueError("retries and backoff must be >= 0 and timeout > 0")
    if reconnect_for is None:
        reconnect_for = reconnect_setting()
    if not 0 <= reconnect_for <= MAX_RECONNECT_SECONDS:
        raise ValueError(f"reconnect_for is 0 to {MAX_RECONNECT_SECONDS:g} seconds")
    return Options(resolve(url, token), timeout, retries, backoff, reconnect_for)


def reconnect_setting() -> float:
    """TRAINJOBS_RECONNECT_SECONDS, or the default (300)."""
    text = os.environ.get(RECONNECT_ENV, "").strip()
    if not text:
        return DEFAULT_RECONNECT_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_RECONNECT_SECONDS:
        raise ConfigError(f"{RECONNECT_ENV}={text!r}: expected seconds from 0 to {MAX_RECONNECT_SECONDS:g}")
    return value


def http_args(opts: Options) -> dict:
    headers = {"User-Agent": f"trainjobs-client/{__version__}", "Accept": "application/json"}
    if opts.config.token:
        headers["Authorization"] = f"Bearer {opts.config.token}"
    # The read timeout also bounds a quiet log stream: the service sends a heartbeat every 15 s.
    return dict(base_url=opts.config.url, headers=headers, timeout=httpx.Timeout(opts.timeout, connect=10.0))


def retryable(call: Call, exc: httpx.TransportError) -> bool:
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError)):
        return False  # our own mistake: a retry cannot help
    if call.retry == "safe":
        return True
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


def retry_status(call: Call, response: httpx.Response) -> bool:
    # 503: the database did not answer and the request's work was rolled back.
    return call.retry == "safe" and response.status_code == 503


# A follower also waits out a proxy's answers while the service behind it restarts.
FOLLOW_RETRY_STATUSES = (502, 503, 504)


class GaveUp(Exception):
    pass


class Reconnect:
    """A follower's reconnections after the connection is lost: retried with backoff (at most
    MAX_DELAY apart) until `window` seconds have passed since it was lost. `notify` gets one
    line of text per attempt ("reconnecting…") and one when the connection is back."""

    def __init__(self, window: float, backoff: float, notify: Callable[[str], None] | None):
        self.window, self.backoff, self.notify = window, backoff, notify
        self.lost_at: float | None = None
        self.attempt = 0
        self.told = False

    def ok(self) -> None:
        if self.lost_at is not None and self.told and self.notify:
            self.notify(f"reconnected after {time.monotonic() - self.lost_at:.0f} s")
        self.lost_at, self.attempt, self.told = None, 0, False

    def next(self, problem: str | None, advised: float | None = None, retry_after: float | None = None) -> float:
        """Seconds to wait before the next attempt; GaveUp once the window has passed.
        problem None: the service closed the stream cleanly (e.g. asked its followers to
        reconnect): the first attempt is made without a notice. retry_after: the service's
        Retry-After (a stream it could not serve now, 503): obeyed at every attempt, never
        earlier, spread over a quarter more so that thousands told the same second do not all
        come back in it."""
        now = time.monotonic()
        if self.lost_at is None:
            self.lost_at = now
        left = self.window - (now - self.lost_at)
        if left <= 0:
            raise GaveUp(f"{problem or 'the stream kept closing'}; gave up after {self.window:g} s of reconnecting "
                         f"({RECONNECT_ENV})")
        wait = advised if self.attempt == 0 and advised is not None else delay(self.attempt, self.backoff)
        if retry_after is not None:
            wait = retry_after * random.uniform(1.0, 1.25)
        wait = min(wait, left)
        if (problem or self.attempt > 0) and self.notify:
            self.notify(f"{problem or 'the stream closed'}; reconnecting… (attempt {self.attempt + 1}, "
                        f"trying for {left:.0f} s more)")
            self.told = True
        self.attempt += 1
        return wait


def describe(exc: Exception) -> str:
    text = str(exc)
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def delay(attempt: int, backoff: float, response: httpx.Response | None = None) -> float:
    after = response.headers.get("Retry-After") if response is not None else None
    if after and after.isdigit():
        return min(float(after), MAX_RETRY_AFTER)
    return min(backoff * 2 ** attempt, MAX_DELAY) * random.uniform(0.5, 1.0)


def retry_after(response: httpx.Response) -> float | None:
    """A Retry-After in seconds (capped at MAX_RETRY_AFTER), or None."""
    after = response.headers.get("Retry-After", "").strip()
    return min(float(after), MAX_RETRY_AFTER) if after.isdigit() else None


def unreachable(opts: Options, exc: Exception) -> ConnectionFailed:
    return ConnectionFailed(f"could not reach trainjobs at {opts.config.url}: {exc.__class__.__name__}: {exc}")


def error(opts: Options, response: httpx.Response) -> ApiError:
    err = from_response(response)
    if isinstance(err, Unauthorized):
        sent = "no token" if not opts.config.token else f"the token from {opts.config.source}"
        err.detail += (f" (this client sent {sent}; set TRAINJOBS_TOKEN or run `trainjobs login`)")
        err.args = (str(err),)
    return err


class StreamEnded(Exception):
    pass


class Follow:
    """The state of one followed log across reconnections."""

    def __init__(self, since: str | None) -> None:
        self.cursor = since
        self.end: LogEnd | None = None
        self.decoder = Decoder()

    def reconnecting(self) -> None:
        retry_ms = self.decoder.retry_ms  # the service's `retry:` advice holds across connections
        self.decoder = Decoder()  # a half-received event is dropped; it comes again
        self.decoder.retry_ms = retry_ms

    def handle(self, event: Event) -> LogLine | None:
        if event.event == "log":
            line = LogLine.model_validate_json(event.data)
            self.cursor = event.id or line.cursor
            return line
        if event.event == "end":
            self.end = LogEnd.model_validate(json.loads(event.data))
            self.cursor = self.end.cursor or self.cursor
        return None

    def advised_delay(self) -> float | None:
        """The service's `retry:` advice, for the first attempt after a stream ends."""
        return None if self.decoder.retry_ms is None else min(self.decoder.retry_ms / 1000, MAX_DELAY)
