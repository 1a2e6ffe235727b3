from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from service.auth import service
from service.auth.deps import Admin, Viewer
from service.auth.schemas import TokenCreate, TokenCreated, TokenOut
from service.auth.service import unknown_token
from service.persistence.models import ApiToken
from service.web.container import SessionDep
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


def _out(token: ApiToken, team: str) -> dict:
    return dict(id=token.id, name=token.name, role=token.role, team=team, prefix=token.prefix,
                created_at=token.created_at, created_by=token.created_by, revoked_at=token.revoked_at)


@router.get("/me", response_model=TokenOut, operation_id="tokens_me", summary="The token making this request",
            responses=problem_responses(401, 503))
def whoami(session: SessionDep, actor: Viewer):
    token = session.get(ApiToken, actor.token_id)
    if token is None:  # deleted since this request authenticated
        raise unknown_token()
    return _out(token, actor.team)


@router.post("", status_code=201, response_model=TokenCreated, operation_id="tokens_create",
             summary="Create a token for your team (admin)", responses=problem_responses(401, 403, 413, 422, 503))
def create_token(body: TokenCreate, session: SessionDep, actor: Admin, response: Response):
    team = service.get_or_create_team(session, actor.team)
    token, secret = service.create_token(session, team, body.name, body.role, actor.name)
    response.headers["Cache-Control"] = "no-store"
    return TokenCreated(**_out(token, actor.team), token=secret)


@router.get("", response_model=list[TokenOut], operation_id="tokens_list",
            summary="Your team's tokens (admin); secrets are never shown", responses=problem_responses(401, 403, 503))
def list_tokens(session: SessionDep, actor: Admin):
    return [_out(t, actor.team) for t in service.list_tokens(session, actor.team_id)]


@router.post("/{token_id}/revoke", response_model=TokenOut, operation_id="tokens_revoke",
             summary="Revoke a token (admin): refused from now on",
             responses=problem_responses(401, 403, 404, 422, 503))
def revoke_token(token_id: uuid.UUID, session: SessionDep, actor: Admin):
    return _out(service.revoke(session, token_id, actor.team_id, actor.role), actor.team)
