"""The auth dependencies every /v1 route uses: service.auth.authenticate does the work."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPBearer

from service.auth.authenticate import Authenticated, Role, authenticate, bearer_hash, check_role
from service.auth.cache import TokenCache
from service.auth.service import Actor
from service.persistence.session import unit_of_work
from service.web.container import SessionDep, services
from service.web.overload import learn_team


class Bearer(HTTPBearer):
    """The bearer scheme in the OpenAPI document (as HTTPBearer), answering the hash of the
    token (authenticate.bearer_hash, the one parser) or a problem+json 401."""

    async def __call__(self, request: Request) -> str:  # type: ignore[override]
        return bearer_hash(request.headers.get("authorization"))


bearer = Bearer(auto_error=False, scheme_name="HTTPBearer", description="A trainjobs token: `trainjobs tokens create`, "
                "or the admin token printed on first start.")
TokenHash = Annotated[str, Security(bearer)]


def current_actor(request: Request, session: SessionDep, token_hash: TokenHash) -> Actor:
    auth = authenticate(token_hash, "viewer", session=session)
    assert auth is not None  # a session was given
    learn_team(request, str(auth.actor.team_id))   # its next requests take its team's turn
    return auth.actor


def require(role: Role):
    # async: no I/O here, so no trip through the thread pool (a sync dependency takes one).
    async def check(actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
        return check_role(actor, role)
    return check


Viewer = Annotated[Actor, Depends(require("viewer"))]
Member = Annotated[Actor, Depends(require("member"))]
Admin = Annotated[Actor, Depends(require("admin"))]


class CachedAuth(Bearer):
    """A dependency for the submit routes: the caller from the token cache with no I/O (its
    revocation is checked by the submit's first query: Authenticated.unverified_token), or
    read from the database in one trip through the thread pool; 401/403 before the body is
    validated. The route's work does its own unit of work (and should run under
    authenticate.forgetting_revoked).

    The bearer scheme itself (a Bearer, declared as `bearer` is), not a dependency on
    Security(bearer): FastAPI solves one level of dependencies less on every submit
    (bench/profile_submit.py --parts), and the OpenAPI document is the same."""

    def __init__(self, role: Role) -> None:
        super().__init__(auto_error=False, scheme_name=bearer.scheme_name, description=bearer.model.description)
        self.role: Role = role

    async def __call__(self, request: Request) -> Authenticated:  # type: ignore[override]
        token_hash = bearer_hash(request.headers.get("authorization"))
        cache: TokenCache = services(request).token_cache
        auth = authenticate(token_hash, self.role, cache=cache)
        if auth is None:
            auth = await run_in_threadpool(_from_database, request, token_hash, self.role, cache)
        learn_team(request, str(auth.actor.team_id))
        return auth


def _from_database(request: Request, token_hash: str, role: Role, cache: TokenCache) -> Authenticated:
    with unit_of_work(services(request).session_factory) as session:
        auth = authenticate(token_hash, role, session=session, cache=cache)
    assert auth is not None  # a session was given
    return auth


member_auth = CachedAuth("member")
CachedMember = Annotated[Authenticated, Depends(member_auth)]
# The service's admin (capacity, team shares, priority classes): tokens made on the host only.
Operator = Annotated[Actor, Depends(require("operator"))]
# The log routes: thousands of followers connecting at once take no token query each
# (service/logs/opening.py checks a cached token's revocation in the job's query).
viewer_auth = CachedAuth("viewer")
CachedViewer = Annotated[Authenticated, Depends(viewer_auth)]
