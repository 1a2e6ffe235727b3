"""Per-epoch progress of Vertex jobs: the chief's and the evaluator's JSON progress
lines (trainer/progress.py: `{"event": "epoch_end", ...}`), read from Cloud Logging
for all followed jobs together, one `entries.list` query per interval, and folded
into job.progress by the same rules as for local jobs (service/backends/progress.py).

    resource.type="ml_job" AND (resource.labels.job_id="1" OR ...)
      AND (resource.labels.task_name="workerpool0-0" OR resource.labels.task_name="workerpool3-0")
      AND (jsonPayload.event:* OR textPayload:"\\"event\\"") AND timestamp>="<oldest cursor>"

Vertex logs a replica's stdout line as jsonPayload when it is a JSON object (else as
textPayload): both are read. Each job keeps its own cursor (timestamp, insertId), so a
line is counted once. Entries come oldest first across all jobs, so once a read got to
time T no job has an unread line before T: a read cut short (page cap) moves every
job's cursor up to T and the next one goes on from there. A job that ended is read a
few more times for the lines Cloud Logging ingests late."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from google.cloud import logging as cloud_logging

from service.backends import progress as progress_rules
from service.backends.vertex.budget import BudgetSpent
from service.backends.vertex.logs import BudgetedSession, Terms, _quoted, _utc, budgeted_entries, message_of
from service.backends.vertex.mapping import CREATE_TIME_SLACK, rfc3339

log = logging.getLogger("trainjobs.vertex.progress")

# Vertex's task names for the chief (pool 0) and the evaluator (pool 3, at most one).
TASK_ROLES = {"workerpool0-0": "chief", "workerpool3-0": "evaluator"}
MAX_FILTER_CHARS = 15_000   # Cloud Logging accepts filters up to 20,000 characters
MAX_PAGES = 5               # per query and interval; the next interval goes on from there
PAGE_SIZE = 1000
FINAL_READS = 2             # reads of an ended job, for lines ingested after its end was seen
_EPOCH = datetime.fromtimestamp(0, timezone.utc)


@dataclass
class _Job:
    numeric: str
    cursor: tuple[datetime, str]
    progress: dict | None = None
    changed: bool = False
    final_reads: int | None = None   # None while running


class ProgressReader:
    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self._clock = clock
        self._jobs: dict[str, _Job] = {}
        self._last: float | None = None
        self.queries = 0   # entries.list calls made (benchmarks, tests)

    def clear(self) -> None:
        self._jobs.clear()
        self._last = None

    def follow(self, job_id: str, numeric: str, created_at: datetime) -> None:
        """A running job whose progress lines are read from now on (no-op if followed)."""
        if job_id not in self._jobs:
            self._jobs[job_id] = _Job(numeric, (created_at - CREATE_TIME_SLACK, ""))

    def ended(self, job_id: str) -> bool:
        """The job ended: read it a few more times. True if it was followed."""
        job = self._jobs.get(job_id)
        if job is None:
            return False
        if job.final_reads is None:
            job.final_reads = FINAL_READS
        return True

    def due(self) -> bool:
        return bool(self._jobs) and (self._last is None or self._clock() - self._last >= self.interval)

    def read(self, client: cloud_logging.Client, session: BudgetedSession, project: str) -> dict[str, dict]:
        """One read of every followed job's new progress lines, if the budget has a token
        to spare (none is taken from a person's log page). Returns the changed progress
        of each job that has some."""
        jobs = dict(self._jobs)
        if not jobs:
            return {}
        read: set[str] = set()
        started = self._clock()
        for chunk in _chunks(jobs):
            try:
                self._read_chunk(client, session, project, chunk)
            except BudgetSpent as e:
                log.info("progress of %d Vertex jobs waits for the Cloud Logging budget: %s", len(chunk), e)
                if not read:
                    return {}   # nothing spent: due again on the next pass
                break
            except Exception as e:  # noqa: BLE001 - 429, outage: the next interval
                log.info("progress of %d Vertex jobs not read now: %s", len(chunk), e)
                break
            read.update(chunk)
        self._last = started
        out: dict[str, dict] = {}
        for job_id, job in jobs.items():
            if job.changed and job.progress is not None:
                out[job_id] = job.progress
                job.changed = False
            if job.final_reads is not None and job_id in read:
                job.final_reads -= 1
                if job.final_reads <= 0:
                    self._jobs.pop(job_id, None)
        return out

    def _read_chunk(self, client, session: BudgetedSession, project: str, chunk: dict[str, _Job]) -> None:
        by_numeric = {job.numeric: job for job in chunk.values()}
        since = min(job.cursor[0] for job in chunk.values())
        reached: datetime | None = None
        # Never waits for a token, and leaves one behind for a person's log page.
        reserve = min(1.0, session.bucket.capacity - 1)
        entries = budgeted_entries(client, session, Terms(reserve=reserve, max_calls=MAX_PAGES),
                                   resource_names=[f"projects/{project}"], filter_=progress_filter(by_numeric, since),
                                   order_by=cloud_logging.ASCENDING, page_size=PAGE_SIZE)
        self.queries += 1
        for entry in entries:
            labels = (entry.resource.labels if entry.resource is not None else None) or {}
            job = by_numeric.get(labels.get("job_id"))
            role = TASK_ROLES.get(labels.get("task_name"))
            at = _utc(entry.timestamp)
            reached = at
            key = (at, entry.insert_id or "")
            if job is None or role is None or key <= job.cursor:
                continue
            job.cursor = key
            new = progress_rules.update(job.progress, _text(entry), at.isoformat().replace("+00:00", "Z"), role)
            if new is not None:
                job.progress, job.changed = new, True
        if reached is not None:
            for job in chunk.values():
                if job.cursor < (reached, ""):
                    job.cursor = (reached, "")


def _text(entry) -> str:
    payload = entry.payload
    if isinstance(payload, dict) and "event" in payload:
        return json.dumps(payload)
    return message_of(entry)


def progress_filter(jobs: dict[str, object], since: datetime) -> str:
    ids = " OR ".join(f"resource.labels.job_id={_quoted(n)}" for n in jobs)
    tasks = " OR ".join(f"resource.labels.task_name={_quoted(t)}" for t in TASK_ROLES)
    return (f'resource.type="ml_job" AND ({ids}) AND ({tasks}) '
            f'AND (jsonPayload.event:* OR textPayload:"\\"event\\"") AND timestamp>="{rfc3339(max(since, _EPOCH))}"')


def _chunks(jobs: dict[str, _Job]):
    """Groups of jobs whose one filter stays under Cloud Logging's length limit."""
    chunk: dict[str, _Job] = {}
    size = 0
    for job_id, job in sorted(jobs.items(), key=lambda kv: kv[1].cursor):
        cost = len(job.numeric) + 40
        if chunk and size + cost > MAX_FILTER_CHARS - 400:
            yield chunk
            chunk, size = {}, 0
        chunk[job_id] = job
        size += cost
    if chunk:
        yield chunk
