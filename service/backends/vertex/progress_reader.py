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
few more times for the lines Cloud Logging ingests late.

Stalls ride on the same query (no extra read): for a job with `stall_timeout_seconds`
the filter also takes every line of its chief and workers (pools 0 and 1), and the
timestamp of each replica's last line is kept. The silence reported for a replica runs
from that line (for one that never logged, from Vertex's startTime) to where the reads
have *covered*: the instant the last complete read was sent, or, for a read cut short
by the page cap, the last entry it got to. A read skipped (budget spent, 429, outage)
covers nothing, so a silence nobody read is never counted; the next successful read
covers the gap from the entries Cloud Logging keeps."""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from google.cloud import logging as cloud_logging

from service.backends import progress as progress_rules
from service.backends.vertex.budget import BudgetSpent
from service.backends.vertex.logs import (
    BudgetedSession,
    Terms,
    _quoted,
    _utc,
    budgeted_entries,
    message_of,
)
from service.backends.vertex.mapping import CREATE_TIME_SLACK, rfc3339

log = logging.getLogger("trainjobs.vertex.progress")

# Vertex's task names for the chief (pool 0) and the evaluator (pool 3, at most one).
TASK_ROLES = {"workerpool0-0": "chief", "workerpool3-0": "evaluator"}
# Task-name prefixes of the replicas judged for stalls: the chief (pool 0) and the workers
# (pool 1). Parameter servers / Reduction Server (pool 2) and the evaluator (pool 3) wait
# silently by design. In Cloud Logging's query language `:` is a substring match.
JUDGED_POOLS = ("workerpool0-", "workerpool1-")
MAX_FILTER_CHARS = 15_000   # Cloud Logging accepts filters up to 20,000 characters
MAX_PAGES = 5               # per query and interval; the next interval goes on from there
PAGE_SIZE = 1000
FINAL_READS = 2             # reads of an ended job, for lines ingested after its end was seen
_EPOCH = datetime.fromtimestamp(0, UTC)


@dataclass
class _Job:
    numeric: str
    cursor: tuple[datetime, str]
    progress: dict | None = None
    changed: bool = False
    final_reads: int | None = None   # None while running
    watch: tuple[str, ...] = ()      # task names judged for stalls (chief, workers); (): none
    running_since: datetime | None = None   # Vertex's startTime: a replica never heard of counts from here
    last_seen: dict = field(default_factory=dict)   # task name -> timestamp of its last line read
    covered_to: datetime | None = None   # every line stamped before this has been read


class ProgressReader:
    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.interval = interval
        self._clock = clock
        self._wall = wall   # when a read is sent, on Cloud Logging's time axis (UTC)
        self._jobs: dict[str, _Job] = {}
        self._last: float | None = None
        self.queries = 0   # entries.list calls made (benchmarks, tests)

    def clear(self) -> None:
        self._jobs.clear()
        self._last = None

    def follow(self, job_id: str, numeric: str, created_at: datetime, *, watch: tuple[str, ...] = (),
               running_since: datetime | None = None) -> None:
        """A running job whose progress lines are read from now on (no-op if followed).
        `watch`: its replicas judged for stalls, a silent one counted from `running_since`."""
        job = self._jobs.get(job_id)
        if job is None:
            job = self._jobs[job_id] = _Job(numeric, (created_at - CREATE_TIME_SLACK, ""))
        if job.final_reads is None and running_since is not None and job.running_since is None:
            job.running_since = _utc(running_since)
            job.watch = tuple(watch)

    def running_known(self, job_id: str) -> bool:
        """Followed, and told when it started running (and what to judge)."""
        job = self._jobs.get(job_id)
        return job is not None and job.running_since is not None

    def ended(self, job_id: str) -> bool:
        """The job ended: read it a few more times. True if it was followed."""
        job = self._jobs.get(job_id)
        if job is None:
            return False
        if job.final_reads is None:
            job.final_reads = FINAL_READS
        job.watch = ()   # nothing left to judge
        return True

    def silence(self, job_id: str) -> dict | None:
        """The longest-silent watched replica of a running job, over covered time only:
        {"replica": task name, "seconds": s}; None if nothing is watched or covered yet."""
        job = self._jobs.get(job_id)
        if job is None or not job.watch or job.covered_to is None or job.running_since is None:
            return None
        worst: tuple[float, str] | None = None
        for task in job.watch:
            since = max(job.last_seen.get(task, job.running_since), job.running_since)
            seconds = (job.covered_to - since).total_seconds()
            if worst is None or seconds > worst[0]:
                worst = (seconds, task)
        if worst is None or worst[0] <= 0:
            return None
        return {"replica": worst[1], "seconds": round(worst[0], 3)}

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
        terms = Terms(reserve=reserve, max_calls=MAX_PAGES)
        watched = [job.numeric for job in chunk.values() if job.watch]
        sent = _utc(self._wall())
        entries = budgeted_entries(client, session, terms, resource_names=[f"projects/{project}"],
                                   filter_=progress_filter(by_numeric, since, watched),
                                   order_by=cloud_logging.ASCENDING, page_size=PAGE_SIZE)
        self.queries += 1
        for entry in entries:
            labels = (entry.resource.labels if entry.resource is not None else None) or {}
            job = by_numeric.get(labels.get("job_id") or "")
            task = labels.get("task_name")
            at = _utc(entry.timestamp)
            reached = at
            if job is not None and task in job.watch and at > job.last_seen.get(task, _EPOCH):
                job.last_seen[task] = at
            role = TASK_ROLES.get(task or "")
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
        # Read to the end: every line stamped before the query went out is known (later
        # ones come next time). Cut short by the page cap: up to the last entry it got to.
        covered = reached if terms.capped else max(sent, reached or sent)
        if covered is not None:
            for job in chunk.values():
                if job.covered_to is None or covered > job.covered_to:
                    job.covered_to = covered


def _text(entry) -> str:
    payload = entry.payload
    if isinstance(payload, dict) and "event" in payload:
        return json.dumps(payload)
    return message_of(entry)


def progress_filter(jobs: Mapping[str, object], since: datetime, watched: list[str] | tuple = ()) -> str:
    """Progress lines of every job; for the `watched` ones (judged for stalls) also every
    line of their chiefs and workers (task names workerpool0-*, workerpool1-*). Each job id
    is named once, so a chunk holds as many jobs as without stalls."""
    stamp = f'timestamp>="{rfc3339(max(since, _EPOCH))}"'
    event = '(jsonPayload.event:* OR textPayload:"\\"event\\"")'
    tasks = " OR ".join(f"resource.labels.task_name={_quoted(t)}" for t in TASK_ROLES)
    plain = [n for n in jobs if n not in set(watched)]
    groups = []
    if plain:
        ids = " OR ".join(f"resource.labels.job_id={_quoted(n)}" for n in plain)
        groups.append(f"({ids}) AND ({tasks}) AND {event}")
    if watched:
        ids = " OR ".join(f"resource.labels.job_id={_quoted(n)}" for n in watched)
        pools = " OR ".join(f"resource.labels.task_name:{_quoted(p)}" for p in JUDGED_POOLS)
        groups.append(f'({ids}) AND ({pools} OR (resource.labels.task_name="workerpool3-0" AND {event}))')
    if len(groups) == 1:
        return f'resource.type="ml_job" AND {groups[0]} AND {stamp}'
    # Cloud Logging's OR binds tighter than AND: every group is in parentheses.
    return f'resource.type="ml_job" AND (({groups[0]}) OR ({groups[1]})) AND {stamp}'


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
