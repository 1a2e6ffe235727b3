"""Who is calling, and may they: the one place that parses a bearer token, reads the token
cache, forgets a token found revoked, and checks a role. The API's dependencies
(service.auth.deps), the job routes' handlers (service.jobs.router), the log streams (through
those dependencies) and the UI's signed-in session (service.ui.deps) all come here."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from service.auth.cache import TokenCache
from service.auth.service import Actor, hash_token, resolve, unknown_token
from service.core.credentials import bearer_secret
from service.core.errors import Forbidden, Unauthorized
from service.core.text import with_article
from service.persistence.models import ApiToken, Team

Role = Literal["viewer", "member", "admin", "operator"]
_WHAT = {"viewer": "read", "member": "submit and cancel jobs", "admin": "manage templates, tokens and webhooks",
         "operator": "set the service's capacity, team shares and priority classes"}
# Where a token of the role comes from, where the token API cannot make one.
_HOW = {"operator": " (made on the service's host: trainjobs tokens create --role operator)"}


def missing_token() -> Unauthorized:
    return Unauthorized("missing bearer token: send `Authorization: Bearer <token>`",
                        headers={"WWW-Authenticate": "Bearer"})


def bearer_hash(authorization: str | None) -> str:
    """The hash of the bearer token in an Authorization header (parsed as RFC 6750 and
    fastapi.security.HTTPBearer parse it: the scheme in any case); a 401 when there is none."""
    secret = bearer_secret(authorization)
    if secret is None:
        raise missing_token()
    return hash_token(secret)


def check_role(actor: Actor, role: Role) -> Actor:
    if not actor.can(role):
        raise Forbidden(f"your token's role is {actor.role}; to {_WHAT[role]} you need {with_article(role)} token"
                        f"{_HOW.get(role, '')}")
    return actor


@dataclass(frozen=True)
class Authenticated:
    actor: Actor
    token_hash: str
    # True when the actor came from the token cache: its revocation is still to be checked,
    # by the caller's first query (service.auth.cache explains why that is sound).
    from_cache: bool = False

    @property
    def unverified_token(self) -> str:
        """The token hash the caller's first query must find unrevoked; empty: checked already."""
        return self.token_hash if self.from_cache else ""


def authenticate(token_hash: str, role: Role, *, session: Session | None = None,
                 cache: TokenCache | None = None) -> Authenticated | None:
    """The caller behind `token_hash` (bearer_hash), if their role allows `role`: 401 for an
    unknown or revoked token, 403 for too small a role.

    With `cache`: a cached actor is taken without a query (from_cache), and one read from the
    database is cached. Without `session`: the cache only, no I/O (on the event loop); None
    when the token is not cached, to be asked again with a session (in a thread)."""
    if cache is not None:
        cached = cache.get(token_hash)
        if cached is not None:
            return Authenticated(check_role(cached, role), token_hash, from_cache=True)
    if session is None:
        return None
    actor = resolve(session, token_hash, hashed=True)
    if actor is None:
        raise unknown_token()
    if cache is not None:
        cache.put(token_hash, actor)
    return Authenticated(check_role(actor, role), token_hash)


@contextmanager
def forgetting_revoked(auth: Authenticated, cache: TokenCache) -> Iterator[None]:
    """Around work done as a cached actor: a 401 in it means the token was revoked since it
    was cached, so the cache lets it go (the next request reads the database)."""
    try:
        yield
    except Unauthorized:
        if auth.from_cache:
            cache.forget(auth.token_hash)
        raise


_T, _TEAM = ApiToken.__table__.c, Team.__table__.c
_BY_ID = (select(_T.id, _T.name, _T.role, _T.team_id, _TEAM.name)
          .join_from(ApiToken.__table__, Team.__table__, _TEAM.id == _T.team_id)
          .where(_T.id == bindparam("token_id"), _T.revoked_at.is_(None)))


def authenticate_session(session: Session, token_id: uuid.UUID) -> Actor:
    """The caller of a signed-in UI session (service.ui.sessions keeps the token's id, never
    its secret): 401 when the token was revoked since sign-in. The UI checks roles itself,
    with its own words (service.ui.deps.require)."""
    row = session.connection().execute(_BY_ID, {"token_id": token_id}).first()
    if row is None:
        raise unknown_token()
    return Actor(token_id=row[0], token_name=row[1], role=row[2], team_id=row[3], team=row[4])
