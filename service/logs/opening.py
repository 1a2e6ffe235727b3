"""Opening a log page or stream in one trip through the request threads: the caller from the
token cache (no query; its revocation checked by the job's query), the job's handle in one
Core query, the first read. Thousands of followers connecting at once each paid a token
query, the job's ORM load and four thread trips (bench/load.py --followers 5000, issue 39):
the slots that streams open in stayed busy, and the last ones were refused."""
from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy import Table, bindparam, exists, select
from sqlalchemy.orm import Session

from service import jobspec
from service.auth.authenticate import Authenticated, forgetting_revoked
from service.auth.cache import TokenCache
from service.auth.service import unknown_token
from service.core.errors import NotFound
from service.lifecycle.protocol import Backend, JobHandle, LogPage
from service.lifecycle.states import JobState
from service.logs import service
from service.persistence.models import ApiToken, Job
from service.persistence.session import unit_of_work


def _table(model: type) -> Table:
    return model.__table__  # type: ignore[attr-defined]


# Built once (a statement built per call costs more than its round trip).
_J, _TOK = _table(Job).c, _table(ApiToken).c
_JOB = select(
    _J.id, _J.state, _J.backend_ref, _J.compiled, _J.created_at, _J.display_name, _J.launch_attempted_at,
    _J.backend, _J.error,
    exists().where(_TOK.token_hash == bindparam("token_hash"), _TOK.revoked_at.is_(None)).label("token_live"),
).where(_J.id == bindparam("job_id"), _J.team_id == bindparam("team_id"))
_TOKEN_LIVE = select(exists().where(_TOK.token_hash == bindparam("token_hash"), _TOK.revoked_at.is_(None)))


def job_view(session: Session, team_id: uuid.UUID, job_id: uuid.UUID, token_hash: str = "") -> service.JobView:
    """The job as the logs need it; NotFound also for another team's job. With `token_hash`
    (a cached caller's), Unauthorized when that token was revoked since it was cached."""
    row = session.connection().execute(_JOB, {"job_id": job_id, "team_id": team_id,
                                              "token_hash": token_hash}).first()
    if row is None:
        if token_hash and not session.connection().execute(_TOKEN_LIVE, {"token_hash": token_hash}).scalar():
            raise unknown_token()  # a revoked token learns nothing of the job
        raise NotFound(f"no job with id {job_id}")
    if token_hash and not row.token_live:
        raise unknown_token()
    compiled = row.compiled
    handle = JobHandle(id=row.id, state=JobState(row.state), backend_ref=row.backend_ref,
                       compiled=lambda: jobspec.CompiledJob.from_json(compiled), created_at=row.created_at,
                       display_name=row.display_name, launch_attempted_at=row.launch_attempted_at)
    return service.JobView(handle, row.backend, row.error)


def open_logs(session_factory, token_cache: TokenCache, backends: Mapping[str, Backend], auth: Authenticated,
              job_id: uuid.UUID, replica: str | None, cursor: str | None,
              limit: int) -> tuple[Backend, service.JobView, LogPage]:
    """The job and its first page (a bad cursor or replica raises here: a 422, not a broken
    stream). The session is closed before the read and before any stream starts."""
    with forgetting_revoked(auth, token_cache):
        with unit_of_work(session_factory) as session:
            view = job_view(session, auth.actor.team_id, job_id, auth.unverified_token)
    backend = service.backend_of(backends, view)
    return backend, view, service.read(backend, view.handle, replica, cursor, limit)
