"""Reading a job's logs through its backend, and following them as Server-Sent
Events (service/logs/fanout.py follows them). Blocking work runs in worker threads;
no database session stays open between polls."""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.core.errors import BackendRefused, Conflict, Unavailable
from service.jobs import service as jobs
from service.lifecycle.handles import handle_of_job
from service.lifecycle.protocol import (
    Backend,
    JobHandle,
    LogLine,
    LogPage,
    PermanentBackendError,
    TransientBackendError,
)
from service.lifecycle.states import TERMINAL

log = logging.getLogger("trainjobs.logs")


@dataclass(frozen=True)
class JobView:
    handle: JobHandle
    backend: str
    error: dict | None

    @property
    def final(self) -> bool:
        return self.handle.state in TERMINAL


def view_of(session: Session, team_id: uuid.UUID, job_id: uuid.UUID) -> JobView:
    """Raises NotFound (also for another team's job)."""
    job = jobs.get_job(session, team_id, job_id)
    return JobView(handle_of_job(job), job.backend, job.error)


def load_job(session_factory, team_id: uuid.UUID, job_id: uuid.UUID) -> JobView:
    """A short session of its own: the caller may be a long stream."""
    with session_factory() as session:
        return view_of(session, team_id, job_id)


def backend_of(backends: Mapping[str, Backend], view: JobView) -> Backend:
    backend = backends.get(view.backend)
    if backend is None:
        raise Conflict(f"job {view.handle.id} ran on backend {view.backend!r}, which is not enabled on "
                       "this service, so its logs cannot be read here")
    return backend


def read(backend: Backend, handle: JobHandle, replica: str | None, since: str | None, limit: int) -> LogPage:
    try:
        return backend.read_logs(handle, replica=replica, since=since, limit=limit)
    except TransientBackendError as e:
        raise Unavailable(f"the {backend.name} backend could not read the logs now: {e}; retry shortly") from None
    except PermanentBackendError as e:
        raise BackendRefused(f"the {backend.name} backend refused to read the logs: {e.message}") from None


def line_json(line: LogLine) -> dict:
    ts = line.timestamp.isoformat().replace("+00:00", "Z")  # as the JSON pages write it
    return {"replica": line.replica, "stream": line.stream, "timestamp": ts,
            "message": line.message, "cursor": line.cursor}


def _event(kind: str, data: dict, event_id: str | None) -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def log_event(line: LogLine, max_bytes: int | None = None) -> str:
    """One `log` event; with `max_bytes`, a message longer than that (as sent, JSON-escaped:
    a control character takes 6 bytes) is cut, ending with a marker that says so."""
    data = line_json(line)
    if max_bytes is not None:
        data["message"] = cut_message(line.message, max_bytes)
    return _event("log", data, line.cursor)


def cut_message(message: str, max_bytes: int) -> str:
    if len(message) * 12 <= max_bytes:  # no character escapes to more than 12 bytes: short enough
        return message
    sent = len(json.dumps(message)) - 2
    if sent <= max_bytes:
        return message
    room = max_bytes - 80  # for the marker
    keep = min(len(message), room)
    while keep > 0:
        sent = len(json.dumps(message[:keep])) - 2
        if sent <= room:
            break
        keep = min(keep - 1, keep * room // sent)  # shrinks at least by one; two or three rounds
    keep = max(keep, 0)
    return f"{message[:keep]}\u2026[trainjobs: line cut for streaming, {len(message) - keep} more characters]"


def cap_page(page: LogPage, max_bytes: int) -> LogPage:
    """At most `max_bytes` of messages (UTF-8) in a JSON page, and at least one line: a page
    stops early with its cursor after its last line, so the next page resumes there."""
    total = 0
    for i, line in enumerate(page.lines):
        total += len(line.message.encode())
        if total > max_bytes and i > 0:
            return LogPage(lines=page.lines[:i], cursor=page.lines[i - 1].cursor, more=True)
    return page


def end_event(view: JobView, cursor: str | None) -> str:
    return _event("end", {"state": view.handle.state.value, "error": view.error, "cursor": cursor}, cursor)
