"""The auth dependencies every /v1 route uses."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth.service import Actor, resolve
from service.db import SessionDep
from service.errors import Forbidden, Unauthorized

# auto_error=False: a missing header becomes our own problem+json 401.
bearer = HTTPBearer(auto_error=False, description="A trainjobs token: `trainjobs tokens create`, "
                    "or the admin token printed on first start.")

_WHAT = {"viewer": "read", "member": "submit and cancel jobs", "admin": "manage templates, tokens and webhooks"}


def current_actor(session: SessionDep,
                  creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> Actor:
    if creds is None or not creds.credentials:
        raise Unauthorized("missing bearer token: send `Authorization: Bearer <token>`",
                           headers={"WWW-Authenticate": "Bearer"})
    actor = resolve(session, creds.credentials)
    if actor is None:
        raise Unauthorized("unknown or revoked token; ask an admin of your team for a new one",
                           headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return actor


def require(role: str):
    def check(actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
        if not actor.can(role):
            raise Forbidden(f"your token's role is {actor.role}; to {_WHAT[role]} you need a {role} token")
        return actor
    return check


Viewer = Annotated[Actor, Depends(require("viewer"))]
Member = Annotated[Actor, Depends(require("member"))]
Admin = Annotated[Actor, Depends(require("admin"))]
