from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from service.auth import service
from service.auth.deps import Admin, Viewer
from service.auth.schemas import TokenCreate, TokenCreated, TokenOut
from service.db import SessionDep
from service.models import ApiToken
from service.problems import PROBLEM_RESPONSES

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], responses=PROBLEM_RESPONSES)


def _out(token: ApiToken, team: str) -> dict:
    return dict(id=token.id, name=token.name, role=token.role, team=team, prefix=token.prefix,
                created_at=token.created_at, created_by=token.created_by, revoked_at=token.revoked_at)


@router.get("/me", response_model=TokenOut, summary="The token making this request")
def whoami(session: SessionDep, actor: Viewer):
    return _out(session.get(ApiToken, actor.token_id), actor.team)


@router.post("", status_code=201, response_model=TokenCreated, summary="Create a token for your team (admin)")
def create_token(body: TokenCreate, session: SessionDep, actor: Admin, response: Response):
    team = service.get_or_create_team(session, actor.team)
    token, secret = service.create_token(session, team, body.name, body.role, actor.name)
    response.headers["Cache-Control"] = "no-store"
    return TokenCreated(**_out(token, actor.team), token=secret)


@router.get("", response_model=list[TokenOut], summary="Your team's tokens (admin); secrets are never shown")
def list_tokens(session: SessionDep, actor: Admin):
    return [_out(t, actor.team) for t in service.list_tokens(session, actor.team_id)]


@router.post("/{token_id}/revoke", response_model=TokenOut, summary="Revoke a token (admin): refused from now on")
def revoke_token(token_id: uuid.UUID, session: SessionDep, actor: Admin):
    return _out(service.revoke(session, token_id, actor.team_id), actor.team)
