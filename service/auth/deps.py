"""The auth dependencies every /v1 route uses."""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Annotated

import anyio
from fastapi import Depends, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from service.auth.service import Actor, hash_token, resolve, unknown_token
from service.core.errors import Forbidden, Unauthorized
from service.web.container import SessionDep, get_session, services

# auto_error=False: a missing header becomes our own problem+json 401.
bearer = HTTPBearer(auto_error=False, description="A trainjobs token: `trainjobs tokens create`, "
                    "or the admin token printed on first start.")

_WHAT = {"viewer": "read", "member": "submit and cancel jobs", "admin": "manage templates, tokens and webhooks"}


def _secret(creds: HTTPAuthorizationCredentials | None) -> str:
    if creds is None or not creds.credentials:
        raise Unauthorized("missing bearer token: send `Authorization: Bearer <token>`",
                           headers={"WWW-Authenticate": "Bearer"})
    return creds.credentials


def current_actor(session: SessionDep,
                  creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> Actor:
    actor = resolve(session, _secret(creds))
    if actor is None:
        raise unknown_token()
    return actor


def ensure_role(actor: Actor, role: str) -> Actor:
    if not actor.can(role):
        raise Forbidden(f"your token's role is {actor.role}; to {_WHAT[role]} you need a {role} token")
    return actor


def require(role: str):
    # async: no I/O here, so no trip through the thread pool (a sync dependency takes one).
    async def check(actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
        return ensure_role(actor, role)
    return check


Viewer = Annotated[Actor, Depends(require("viewer"))]
Member = Annotated[Actor, Depends(require("member"))]
Admin = Annotated[Actor, Depends(require("admin"))]


@dataclass(frozen=True)
class MemberSession:
    session: Session
    actor: Actor
    # Set when the actor came from the token cache: the token's hash, still to be checked
    # against revocation in the submit's first query (auth.cache). Empty: checked already.
    unverified_token: str = ""


async def member_session(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None,
                                                             Security(bearer)]) -> AsyncIterator[MemberSession]:
    """SessionDep and Member in one, for the submit path: the same unit of work
    (service.persistence.session.get_session, driven here) and the same checks in the same order — 401/403
    before any body is looked at — in one trip through the thread pool instead of three.
    Each trip costs about as much as a database round trip; a sync dependency takes one,
    a sync generator two. The endpoint commits in its own thread; then ending the unit of
    work does no I/O and runs here, on the event loop. When a transaction is still open
    (an error, a dry run), it ends in the thread pool like any database call."""
    token_hash = hash_token(_secret(creds))
    cache = services(request).token_cache
    cached = cache.get(token_hash)
    unit = get_session(request)
    session = next(unit)  # a Session object: no connection until its first statement
    try:
        if cached is not None:
            # No trip through the thread pool and no query: the revocation check rides on
            # the submit's template query (MemberSession.unverified_token).
            yield MemberSession(session, ensure_role(cached, "member"), token_hash)
        else:
            actor = await run_in_threadpool(_resolve_member, session, token_hash, cache)
            yield MemberSession(session, actor)
    except BaseException as exc:
        if isinstance(exc, Unauthorized):
            cache.forget(token_hash)  # revoked since it was cached
        with anyio.CancelScope(shield=True):  # a client gone away must not leave the connection checked out
            await run_in_threadpool(_end, unit, exc)
        raise
    if session.in_transaction():
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(_end, unit, None)
    else:
        _end(unit, None)


def _resolve_member(session: Session, token_hash: str, cache) -> Actor:
    actor = resolve(session, token_hash, hashed=True)
    if actor is None:
        raise unknown_token()
    cache.put(token_hash, actor)
    return ensure_role(actor, "member")


def _end(unit: Iterator[Session], exc: BaseException | None) -> None:
    """Finish get_session: commit and close, or (with exc) roll back and close."""
    if exc is None:
        next(unit, None)
        return
    try:
        unit.throw(exc)
    except BaseException:  # get_session re-raises exc after its rollback; the caller raises it
        pass


Submitter = Annotated[MemberSession, Depends(member_session, scope="function")]
