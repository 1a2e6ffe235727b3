"""Reading a Vertex job's logs for the API, within the Cloud Logging read budget.

Cloud Logging allows 60 `entries.list` calls a minute per project, shared with everyone
using Logs Explorer there, so who may read when is decided here (the wire format, the
cursor and the budgeted session are logs.py's):

- a person's page waits up to `logs_budget_wait_seconds` for a token, then answers 503
  with Retry-After (problems.py);
- a follower that has caught up (it reads from a cursor where an earlier read came to
  the end of the log) goes to Google at most once per follow interval for that cursor,
  takes a token of the followers' share (`logs_follow_share`) without waiting, and
  otherwise answers "nothing new yet": its lines come a little later.

The cursors where reads came to the end are remembered per (job, replica); log reads
come from many request threads, so a lock guards them."""
from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import Callable

from service.backends.vertex import errors, logs
from service.backends.vertex.budget import BudgetSpent, GoogleBudget
from service.backends.vertex.clients import Clients
from service.backends.vertex.clock import Clock
from service.backends.vertex.problems import LogsBudgetSpent, LogsRefused
from service.backends.vertex.settings import VertexSettings
from service.lifecycle.protocol import JobHandle, LogPage, TransientBackendError
from service.lifecycle.states import TERMINAL

log = logging.getLogger("trainjobs.vertex")

MAX_TAILS_PER_LOG = 64        # followers of one log at different points, remembered
MAX_LOGS_REMEMBERED = 10_000  # beyond this, followers long gone are forgotten

TailKey = tuple[uuid.UUID, str | None]   # (job id, replica or None for all of them)


class LogReader:
    def __init__(self, settings: VertexSettings, budget: GoogleBudget, clock: Clock,
                 clients: Callable[[], Clients | None]):
        self.settings = settings
        self.budget = budget
        self.clock = clock
        self._clients = clients   # None until the backend is started
        # (job id, replica) -> {cursor where a read came to the end of the log: when it was read}
        self._tails: dict[TailKey, dict[str, float]] = {}
        self._lock = threading.Lock()

    def read(self, job: JobHandle, *, replica: str | None, since: str | None, limit: int) -> LogPage:
        """A page of a job's logs: see the module's docstring for who waits and who is told
        "nothing new yet"."""
        clients = self._clients()
        if clients is None:
            raise RuntimeError("vertex backend not started")
        cfg = clients.config
        limit = max(1, min(limit, logs.MAX_PAGE))
        key: TailKey = (job.id, replica)
        now = self.clock.mono()
        with self._lock:
            read_at = (self._tails.get(key, {}).get(since) if since is not None and job.state not in TERMINAL
                       else None)
        at_tail = read_at is not None
        if read_at is not None and now - read_at < self._tail_interval(now):
            return LogPage(lines=[], cursor=since)
        bucket = self.budget.logging
        # A follower's read takes a token of the followers' share, never waits, and leaves the
        # people's part of the burst behind; a page may wait a moment.
        terms: Callable[[], logs.Terms] = (
            (lambda: logs.Terms(reserve=bucket.capacity * (1 - self.settings.logs_follow_share),
                                share=self.budget.follow)) if at_tail
            else (lambda: logs.Terms(wait=self.settings.logs_budget_wait_seconds)))
        policy = errors.retry_policy(cfg.retry_initial, cfg.retry_deadline)
        policy = policy.with_predicate(lambda e: errors.is_transient(e) and not errors.is_rate_limited(e))
        try:
            page = policy(lambda: logs.read_page(clients.logging, clients.logging_session, cfg.project, job,
                                                 replica=replica, since=since, limit=limit, terms=terms()))()
        except BudgetSpent as e:
            if at_tail:
                return LogPage(lines=[], cursor=since)   # a follower just sees its lines a little later
            raise LogsBudgetSpent(f"reading logs from Cloud Logging: {e}; retry after {e.retry_after_header} s",
                                  headers={"Retry-After": e.retry_after_header}) from None
        except Exception as e:  # noqa: BLE001
            if not errors.is_google_error(e):
                raise
            if errors.is_rate_limited(e):
                if at_tail:
                    return LogPage(lines=[], cursor=since)
                retry = str(max(1, math.ceil(bucket.wait_time())))
                raise LogsBudgetSpent(f"Cloud Logging answered 429 (its read quota is spent); retry after {retry} s",
                                      headers={"Retry-After": retry}) from None
            err = errors.as_backend_error(e, "reading logs from Cloud Logging")
            if isinstance(err, TransientBackendError):
                raise err from e
            raise LogsRefused(f"Cloud Logging refused to read this job's logs: {err.message}",
                              backend_code=err.code) from e
        self._remember_tail(key, since, page, limit, now, job)
        return page

    def follow_interval(self, *, caught_up: bool, idle_seconds: float) -> float:
        """For a log follower (the SSE fan-out): read again at once while there is more;
        once caught up, every `logs_follow_min_seconds`, growing with quiet time up to
        `logs_follow_max_seconds`, and never so often that the jobs being followed together
        would use more than `logs_follow_share` of the Cloud Logging budget."""
        if not caught_up:
            return 0.0
        s = self.settings
        quiet = min(s.logs_follow_max_seconds, max(s.logs_follow_min_seconds, idle_seconds / 2))
        return max(quiet, self._tail_interval(self.clock.mono()))

    def _tail_interval(self, now: float) -> float:
        """Seconds between reads from one follower's cursor: the minimum, or the followed
        jobs' share of the budget spread over all of them, whichever is longer."""
        s = self.settings
        horizon = 2 * s.logs_follow_max_seconds
        with self._lock:
            followed = sum(1 for reads in self._tails.values() if reads and now - max(reads.values()) < horizon)
        share_per_second = self.budget.logging.rate * s.logs_follow_share
        return max(s.logs_follow_min_seconds, max(1, followed) / share_per_second)

    def _remember_tail(self, key: TailKey, since: str | None, page: LogPage, limit: int, now: float,
                       job: JobHandle) -> None:
        """Where a read came to the end of the log so far: a follower reads on from there."""
        with self._lock:
            if job.state in TERMINAL:
                self._tails.pop(key, None)
                return
            reads = self._tails.setdefault(key, {})
            if since is not None and since in reads:
                reads[since] = now
            if len(page.lines) < limit and page.cursor is not None:
                reads[page.cursor] = now
            while len(reads) > MAX_TAILS_PER_LOG:
                reads.pop(min(reads, key=reads.__getitem__))
            if len(self._tails) > MAX_LOGS_REMEMBERED:  # forget followers long gone
                horizon = 2 * self.settings.logs_follow_max_seconds
                for k, r in list(self._tails.items()):
                    if not r or now - max(r.values()) > horizon:
                        self._tails.pop(k, None)
