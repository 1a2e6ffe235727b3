"""The Google-call budget: every call this process makes to Google goes through
token buckets, so the service stays under Google's per-project quotas with room
left for the people and tools that share them (shared/VERTEX.md):

    vertex   every Vertex AI call in the region   TRAINJOBS_VERTEX_CALLS_PER_MINUTE (120):
             customJobs create/get/list/cancel,   Vertex allows about 600 a minute for
             models upload/list                   get/list/cancel, shared by the project
    create   customJobs.create, models.upload     Vertex: about 60 a minute per region
    crud     get, list, cancel                    (no rate of its own: the vertex one)
    logging  entries.list                         Cloud Logging: 60 a minute per project
             (log followers also need a token of their share, `logging-follow`)

A Vertex AI call takes a token of its kind (create or crud) and one of `vertex`. The
kinds are Google's quotas: a 429 pauses the kind it answered (a refused list does not
stop creates); `vertex` is ours alone and never pauses.

Calls have a priority: following jobs (the poller's lists and gets) is background
work and leaves `reserve` tokens of the vertex bucket behind, so creates and cancels
find a token first when the budget is short; polling then slows down (each job's
state is refreshed less often) instead of starving them.

A bucket holds up to `burst` tokens and refills at `per_minute`. A 429 from Google
empties it and pauses it (2 s, doubling with each 429 in a row up to the longest
backoff): Google sends no Retry-After, and every later call of that kind would only
be refused too. The controller asks without waiting (a job whose create finds no
token stays QUEUED and says why); a person's log page waits a moment, then gets 503
with Retry-After."""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service.backends.vertex.settings import VertexSettings

CREATE, CRUD, VERTEX, LOGGING = "create", "crud", "vertex", "logging"
FOLLOW = "logging-follow"   # the part of LOGGING that log followers may use, on top of it
FIRST_BACKOFF = 2.0


class BudgetSpent(Exception):
    """No token for this call within the wait: nothing was sent to Google."""

    def __init__(self, kind: str, retry_after: float, why: str):
        super().__init__(f"the {kind} budget is spent ({why}); next call possible in {retry_after:.1f} s")
        self.kind = kind
        self.retry_after = retry_after
        self.why = why

    @property
    def retry_after_header(self) -> str:
        return str(max(1, math.ceil(self.retry_after)))


@dataclass
class Usage:
    """What a bucket let through and refused (metrics, benchmarks, tests)."""

    granted: int = 0
    refused: int = 0
    throttled: int = 0   # 429s Google answered


class Bucket:
    def __init__(self, kind: str, per_minute: float, burst: int, *, backoff_max: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.kind = kind
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = float(burst)
        self.backoff_max = backoff_max
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._at = clock()
        self._paused_until = 0.0
        self._backoff = 0.0
        self._lock = threading.Lock()
        self.usage = Usage()

    def _refill(self, now: float) -> None:
        if now > self._at:
            self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now

    def _wait_locked(self, now: float, reserve: float) -> float:
        self._refill(now)
        if now < self._paused_until:
            return self._paused_until - now
        missing = 1.0 + reserve - self._tokens
        return 0.0 if missing <= 1e-9 else missing / self.rate

    def paused(self) -> bool:
        """Paused after a 429 (rather than merely out of tokens)."""
        with self._lock:
            return self._clock() < self._paused_until

    def wait_time(self, reserve: float = 0.0) -> float:
        """Seconds until a call could go out (0: now), leaving `reserve` tokens behind."""
        with self._lock:
            return self._wait_locked(self._clock(), reserve)

    def try_take(self, reserve: float = 0.0) -> float:
        """Take a token now if there is one (and `reserve` more stay behind): 0.0. Otherwise
        take nothing and return the seconds until one would be there."""
        wait = self._attempt(reserve)
        if wait:
            with self._lock:
                self.usage.refused += 1
        return wait

    def take(self, wait: float = 0.0, reserve: float = 0.0) -> None:
        """Take a token, waiting up to `wait` seconds for one; else BudgetSpent."""
        deadline = self._clock() + wait
        while True:
            needed = self._attempt(reserve)
            if needed == 0.0:
                return
            if self._clock() + needed > deadline:
                raise self.spent(needed)
            self._sleep(needed)

    def _attempt(self, reserve: float) -> float:
        with self._lock:
            wait = self._wait_locked(self._clock(), reserve)
            if wait == 0.0:
                self._tokens -= 1.0
                self.usage.granted += 1
            return wait

    def spent(self, retry_after: float) -> BudgetSpent:
        """The refusal of one call, saying why (rate, or a pause after a 429)."""
        with self._lock:
            self.usage.refused += 1
        why = ("paused after Google answered 429" if self.paused()
               else f"{self.per_minute:g} calls a minute, {self.capacity:g} at once")
        return BudgetSpent(self.kind, retry_after, why)

    def throttled(self) -> float:
        """Google answered 429: empty the bucket and pause it. Returns the pause."""
        with self._lock:
            now = self._clock()
            self._backoff = min(self.backoff_max, self._backoff * 2 if self._backoff else FIRST_BACKOFF)
            self._paused_until = max(self._paused_until, now + self._backoff)
            self._tokens = 0.0
            self._at = now
            self.usage.throttled += 1
            return self._backoff

    def succeeded(self) -> None:
        """A call went through: the next 429 starts the backoff from the beginning."""
        with self._lock:
            self._backoff = 0.0

    def refund(self) -> None:
        """Give back a token taken for a call that did not go out after all (another
        bucket it also needed had none)."""
        with self._lock:
            self._tokens = min(self.capacity, self._tokens + 1.0)
            self.usage.granted -= 1


class GoogleBudget:
    """The buckets of one process: one per kind of call (and so per region or project,
    since a backend talks to one of each)."""

    def __init__(self, *, create_per_minute: float, create_burst: int, calls_per_minute: float, calls_burst: int,
                 logging_per_minute: float, logging_burst: int, follow_share: float = 0.5, backoff_max: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.buckets = {
            FOLLOW: Bucket(FOLLOW, logging_per_minute * follow_share, max(1, int(logging_burst * follow_share)),
                           backoff_max=backoff_max, clock=clock, sleep=sleep),
            CREATE: Bucket(CREATE, create_per_minute, create_burst, backoff_max=backoff_max, clock=clock, sleep=sleep),
            CRUD: Bucket(CRUD, calls_per_minute, calls_burst, backoff_max=backoff_max, clock=clock, sleep=sleep),
            VERTEX: Bucket(VERTEX, calls_per_minute, calls_burst, backoff_max=backoff_max, clock=clock, sleep=sleep),
            LOGGING: Bucket(LOGGING, logging_per_minute, logging_burst, backoff_max=backoff_max, clock=clock,
                            sleep=sleep),
        }
        # What background calls (following jobs) leave for creates and cancels: half the burst.
        self.reserve = float(calls_burst // 2)

    @classmethod
    def from_settings(cls, settings: VertexSettings, **kw: Any) -> GoogleBudget:
        workers = max(1, settings.workers)
        return cls(create_per_minute=settings.vertex_create_per_minute, create_burst=settings.vertex_create_burst,
                   calls_per_minute=settings.vertex_calls_per_minute, calls_burst=settings.vertex_calls_burst,
                   # Every API process of this host reads logs; each gets its share.
                   logging_per_minute=settings.logging_reads_per_minute / workers,
                   logging_burst=max(1, settings.logging_reads_burst // workers),
                   follow_share=settings.logs_follow_share, backoff_max=settings.google_backoff_max_seconds, **kw)

    def __getitem__(self, kind: str) -> Bucket:
        return self.buckets[kind]

    @property
    def create(self) -> Bucket:
        return self.buckets[CREATE]

    @property
    def vertex(self) -> Bucket:
        """Every Vertex AI call takes a token of this one."""
        return self.buckets[VERTEX]

    @property
    def crud(self) -> Bucket:
        return self.buckets[CRUD]

    def take(self, bucket: Bucket, *, wait: float = 0.0, background: bool = False) -> None:
        """Tokens for one Vertex AI call of `bucket`'s kind (create or crud): of that bucket
        and of the vertex one, both or none; a background call leaves the vertex reserve.
        BudgetSpent (nothing taken) when there is none within `wait`."""
        reserve = self.reserve if background else 0.0
        if bucket is self.vertex:
            bucket.take(wait, reserve)
            return
        bucket.take(wait)
        try:
            self.vertex.take(wait, reserve)
        except BudgetSpent:
            bucket.refund()
            raise

    @property
    def logging(self) -> Bucket:
        return self.buckets[LOGGING]

    @property
    def follow(self) -> Bucket:
        return self.buckets[FOLLOW]
