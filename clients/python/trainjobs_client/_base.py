"""What the sync and async clients share: configuration, headers, the retry
rules, turning error answers into exceptions, and reading a followed log."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

import httpx

from trainjobs_client import __version__
from trainjobs_client._ops import Call
from trainjobs_client.config import Config, resolve
from trainjobs_client.errors import ApiError, ConnectionFailed, Unauthorized, from_response
from trainjobs_client.models import LogEnd, LogLine
from trainjobs_client.sse import Decoder, Event

MAX_DELAY = 8.0  # seconds between two attempts, at most
MAX_RETRY_AFTER = 30.0


@dataclass(frozen=True)
class Options:
    config: Config
    timeout: float
    retries: int
    backoff: float


def options(url: str | None, token: str | None, timeout: float, retries: int, backoff: float) -> Options:
    if retries < 0 or backoff < 0 or timeout <= 0:
        raise ValueError("retries and backoff must be >= 0 and timeout > 0")
    return Options(resolve(url, token), timeout, retries, backoff)


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


def delay(attempt: int, backoff: float, response: httpx.Response | None = None) -> float:
    after = response.headers.get("Retry-After") if response is not None else None
    if after and after.isdigit():
        return min(float(after), MAX_RETRY_AFTER)
    return min(backoff * 2 ** attempt, MAX_DELAY) * random.uniform(0.5, 1.0)


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

    def retry_delay(self, attempt: int, backoff: float) -> float:
        if attempt == 0 and self.decoder.retry_ms is not None:
            return min(self.decoder.retry_ms / 1000, MAX_DELAY)
        return delay(attempt, backoff)
