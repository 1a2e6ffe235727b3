"""Teams and bearer tokens. Tokens are 256-bit random secrets, so one SHA-256
pass is a sound way to store them (a slow password hash buys nothing here and
would cost every request)."""
from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.core.errors import Forbidden, Invalid, NotFound, Problem, Unauthorized
from service.persistence.models import ApiToken, Team, utcnow

# An operator (the service's admin: capacity, team shares, priority classes) is also an admin of
# its own team. Operator tokens are made only on the service's host (`trainjobs tokens create
# --role operator`): the API's token route offers the team roles alone, so no team admin becomes one.
ROLES = ("viewer", "member", "admin", "operator")
TOKEN_PREFIX = "tj_"
_TEAM_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


@dataclass(frozen=True)
class Actor:
    """Who is calling: resolved from the bearer token on every request."""

    token_id: uuid.UUID
    token_name: str
    team_id: uuid.UUID
    team: str
    role: str

    @property
    def name(self) -> str:
        """How this caller appears in job events and created_by."""
        return f"{self.token_name}@{self.team}"

    def can(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)


def unknown_token() -> Unauthorized:
    """The one answer to a token that is not (or no longer) valid, wherever it is found out."""
    return Unauthorized("unknown or revoked token; ask an admin of your team for a new one",
                        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def get_or_create_team(session: Session, name: str) -> Team:
    if not _TEAM_NAME.match(name):
        raise Invalid.of([Problem("team", "team names are lowercase letters, digits and -, starting with a letter",
                                  "e.g. vision-research")])
    team = session.scalar(select(Team).where(Team.name == name))
    if team is None:
        team = Team(name=name)
        session.add(team)
        session.flush()
    return team


def create_token(session: Session, team: Team, name: str, role: str, created_by: str) -> tuple[ApiToken, str]:
    if role not in ROLES:
        raise Invalid.of([Problem("role", f"unknown role {role!r}", f"use one of {', '.join(ROLES)}")])
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(team_id=team.id, name=name, role=role, token_hash=hash_token(secret),
                     prefix=secret[:10], created_by=created_by)
    session.add(token)
    session.flush()
    return token, secret


# Every request runs this: built once (building a statement per call costs more than its
# round trip), and not cached — one indexed lookup, so a revocation holds from the very
# next request in every process.
_T, _TEAM = ApiToken.__table__.c, Team.__table__.c
_RESOLVE = (select(_T.id, _T.name, _T.role, _T.team_id, _TEAM.name)
            .join_from(ApiToken.__table__, Team.__table__, _TEAM.id == _T.team_id)
            .where(_T.token_hash == bindparam("token_hash"), _T.revoked_at.is_(None)))


def resolve(session: Session, secret: str, *, hashed: bool = False) -> Actor | None:
    """`secret`: the bearer token (or its hash_token, with hashed=True)."""
    row = session.connection().execute(_RESOLVE, {"token_hash": secret if hashed else hash_token(secret)}).first()
    if row is None:
        return None
    return Actor(token_id=row[0], token_name=row[1], role=row[2], team_id=row[3], team=row[4])


def list_tokens(session: Session, team_id: uuid.UUID | None) -> list[ApiToken]:
    q = select(ApiToken).order_by(ApiToken.created_at)
    if team_id is not None:
        q = q.where(ApiToken.team_id == team_id)
    return list(session.scalars(q))


# Called with (session, token) in the revoking transaction, once, when a token is revoked.
ON_REVOKE: list[Callable[[Session, ApiToken], Any]] = []


def revoke(session: Session, token_id: uuid.UUID, team_id: uuid.UUID | None, role: str | None = None) -> ApiToken:
    """`role`: the caller's (None: the host's CLI). A token above the caller's role (an operator's,
    for a team admin of its team) is not the caller's to revoke."""
    token = session.get(ApiToken, token_id)
    if token is None or (team_id is not None and token.team_id != team_id):
        raise NotFound(f"no token with id {token_id}")
    if role is not None and ROLES.index(token.role) > ROLES.index(role):
        raise Forbidden(f"token {token_id} is an {token.role} token; only an {token.role} (or the service's host: "
                        "trainjobs tokens revoke) may revoke it")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        # Work launched later as this token stops with it, in the same transaction (its sweeps
        # pause: service.sweeps registers itself here, being a layer above).
        for hook in ON_REVOKE:
            hook(session, token)
    return token


def any_token(session: Session) -> bool:
    return session.scalar(select(ApiToken.id).limit(1)) is not None


def bootstrap_admin(session: Session, secret: str | None = None) -> str | None:
    """On an empty database: team `default` and an admin token, returned once. `secret`:
    use this one (e.g. from a secret manager) instead of a new random one."""
    if secret is not None and (not secret.startswith(TOKEN_PREFIX) or len(secret) < len(TOKEN_PREFIX) + 32):
        raise ValueError(f"TRAINJOBS_BOOTSTRAP_TOKEN must start with {TOKEN_PREFIX!r} and carry at least "
                         "32 random characters after it")
    if any_token(session):
        return None
    try:
        # Several processes may start on an empty database at once: the first to commit
        # bootstraps; the others' team or token insert fails (flush or commit), and they
        # find the work done.
        team = get_or_create_team(session, "default")
        token, new_secret = create_token(session, team, "bootstrap-admin", "admin", "trainjobs")
        if secret is not None:
            token.token_hash, token.prefix = hash_token(secret), secret[:10]
            new_secret = secret
        session.commit()
    except IntegrityError:
        session.rollback()
        return None
    secret = new_secret
    return secret
