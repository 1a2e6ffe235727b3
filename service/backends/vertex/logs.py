"""A Vertex job's replica logs, read from Cloud Logging (`entries:list`).

Vertex writes each replica's stdout/stderr as entries with resource type
`ml_job`, labelled with the CustomJob's numeric id and the replica's task name
(`workerpool1-0`). Pages are read oldest first. The cursor is the timestamp and
insertId of the last line returned: the next read asks for `timestamp>=` that
instant and drops what it already returned, so nothing is skipped or repeated
even when several entries share a timestamp. Every filter carries our own
timestamp bound; without one the client library would add "the last 24 hours"."""
from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from google.auth.transport.requests import AuthorizedSession
from google.cloud import logging as cloud_logging

from service.backends.vertex.budget import Bucket
from service.backends.vertex.mapping import CREATE_TIME_SLACK, rfc3339
from service.core.errors import Invalid, Problem
from service.lifecycle.protocol import JobHandle, LogLine, LogPage

NO_REPLICA = "vertex"   # entries Vertex writes about the job itself, not about one replica
MAX_PAGE = 1000
_EPOCH = datetime.fromtimestamp(0, UTC)
MAX_INSERT_ID = 2048    # Cloud Logging insertIds are short; a cursor carrying more was not ours


@dataclass(frozen=True)
class Cursor:
    at: datetime
    insert_id: str

    def encode(self) -> str:
        raw = json.dumps({"t": rfc3339(self.at), "i": self.insert_id}, separators=(",", ":"))
        return "cl1." + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            if not text.startswith("cl1."):
                raise ValueError("prefix")
            body = text[4:]
            raw = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            if not isinstance(raw, dict) or not isinstance(raw.get("t"), str) or not isinstance(raw.get("i"), str) \
                    or len(raw["i"]) > MAX_INSERT_ID:
                raise ValueError("shape")
            at = datetime.fromisoformat(raw["t"].replace("Z", "+00:00"))
            if at.tzinfo is None:
                raise ValueError("no time zone")
            # Lines are stamped from 1970 on (an entry without a timestamp gets the epoch); earlier,
            # or past year 9999 in UTC (OverflowError), no Cloud Logging filter can say it.
            if at.astimezone(UTC) < _EPOCH:
                raise ValueError("before 1970")
            return cls(at, raw["i"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OverflowError, RecursionError):
            raise Invalid.of([Problem("since", "not a log cursor this service handed out for a Vertex job",
                                      "pass the cursor of the last line (or page) unchanged")]) from None


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def log_filter(numeric_job_id: str, replica: str | None, since: datetime) -> str:
    parts = ['resource.type="ml_job"', f"resource.labels.job_id={_quoted(numeric_job_id)}"]
    if replica:
        parts.append(f"resource.labels.task_name={_quoted(replica)}")
    parts.append(f'timestamp>="{rfc3339(since)}"')
    return " AND ".join(parts)


def _utc(ts: datetime | None) -> datetime:
    if ts is None:
        return datetime.fromtimestamp(0, UTC)
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    return datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond, tzinfo=UTC)


def message_of(entry) -> str:
    payload = entry.payload
    if payload is None:
        return ""
    if isinstance(payload, str):
        text = payload
    elif isinstance(payload, dict):
        message = payload.get("message")
        text = message if isinstance(message, str) else json.dumps(payload)
    else:
        text = str(payload)
    return text.rstrip("\n")


class BudgetedSession(AuthorizedSession):
    """The HTTP session of google-cloud-logging: every request it sends (each page of an
    entries.list) first takes a token of the Cloud Logging budget, on the terms the
    caller set for this thread (`spending`); a 429 pauses the budget. It also caps the
    library's 60 s default timeout."""

    def __init__(self, credentials, timeout: float, bucket: Bucket):
        super().__init__(credentials)
        self._cap = timeout
        self.bucket = bucket
        self._terms = threading.local()

    @contextmanager
    def spending(self, terms: Terms):
        previous = getattr(self._terms, "current", None)
        self._terms.current = terms
        try:
            yield terms
        finally:
            self._terms.current = previous

    # The signature is google-auth's AuthorizedSession.request, which already differs from
    # requests.Session.request (the supertype mypy compares with): ours must match google-auth's.
    def request(self, method, url, data=None, headers=None, max_allowed_time=None,  # type: ignore[override]
                timeout=None, **kwargs):
        terms = getattr(self._terms, "current", None) or Terms()
        if terms.max_calls is not None and terms.calls >= terms.max_calls:
            terms.capped = True   # more pages were waiting: the read stopped short
            raise _PageCap()
        if terms.share is not None:   # a follower's read: within its share first
            wait = terms.share.wait_time()
            if wait:
                raise terms.share.spent(wait)
        self.bucket.take(terms.wait, terms.reserve)
        if terms.share is not None:
            terms.share.try_take()
        terms.calls += 1
        if timeout is None or isinstance(timeout, tuple) or timeout > self._cap:
            timeout = self._cap
        response = super().request(method, url, data=data, headers=headers, max_allowed_time=max_allowed_time,
                                   timeout=timeout, **kwargs)
        if response.status_code == 429:
            self.bucket.throttled()   # Cloud Logging reads have a rate quota only
        elif response.status_code < 400:
            self.bucket.succeeded()
        return response


@dataclass
class Terms:
    wait: float = 0.0                 # seconds a call may wait for a token
    reserve: float = 0.0              # tokens to leave behind (for people's pages)
    max_calls: int | None = None      # pages at most
    share: Bucket | None = None       # a sub-budget the call must also fit (log followers')
    calls: int = 0
    capped: bool = False              # max_calls stopped a read that had more pages


class _PageCap(Exception):
    pass


def budgeted_entries(client: cloud_logging.Client, session: BudgetedSession, terms: Terms, **query) -> Iterator:
    """`client.list_entries(**query)` on budget terms: each page fetched is one call, and a
    caller that stops iterating (or reaches `terms.max_calls`) fetches no further page."""
    entries = client.list_entries(**query)
    while True:
        with session.spending(terms):
            try:
                entry = next(entries)
            except (StopIteration, _PageCap):
                return
        yield entry


def read_page(client: cloud_logging.Client, session: BudgetedSession, project: str, job: JobHandle, *,
              replica: str | None, since: str | None, limit: int, terms: Terms) -> LogPage:
    cursor = Cursor.decode(since) if since else None
    if not job.backend_ref:
        return LogPage(lines=[], cursor=since)  # nothing on Vertex yet, so no logs
    numeric = job.backend_ref.rsplit("/", 1)[-1]
    start = cursor.at if cursor else job.created_at - CREATE_TIME_SLACK
    entries = budgeted_entries(client, session, terms, resource_names=[f"projects/{project}"],
                               filter_=log_filter(numeric, replica, start), order_by=cloud_logging.ASCENDING,
                               page_size=min(limit + 16, MAX_PAGE))
    lines: list[LogLine] = []
    # Entries at the cursor's instant (to the microsecond) that precede or are the
    # cursor's entry were returned already: hold them until the cursor's own entry shows.
    held: list = []
    skipping = cursor is not None
    for entry in entries:
        at = _utc(entry.timestamp)
        if cursor is not None and skipping:
            if at == cursor.at:
                if entry.insert_id == cursor.insert_id:
                    held, skipping = [], False
                else:
                    held.append(entry)
                continue
            # Past the cursor's instant without meeting its entry (it expired):
            # fall back to insertId order among the held ones.
            pending = [e for e in held if (e.insert_id or "") > cursor.insert_id] + [entry]
            held, skipping = [], False
        else:
            pending = [entry]
        for e in pending:
            lines.append(_line(e))
            if len(lines) >= limit:
                return LogPage(lines=lines, cursor=lines[-1].cursor)
    if cursor is not None and skipping and held:
        for e in held:
            if (e.insert_id or "") > cursor.insert_id and len(lines) < limit:
                lines.append(_line(e))
    return LogPage(lines=lines, cursor=lines[-1].cursor if lines else since)


def _line(entry) -> LogLine:
    at = _utc(entry.timestamp)
    labels = (entry.resource.labels if entry.resource is not None else None) or {}
    return LogLine(cursor=Cursor(at, entry.insert_id or "").encode(), replica=labels.get("task_name") or NO_REPLICA,
                   stream=entry.severity or "DEFAULT", timestamp=at, message=message_of(entry))
