"""Who is signed in to the UI, and the CSRF check every form post goes through.
Roles and teams are the API's own (service.auth): the same Actor, the same rules."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.datastructures import FormData

from service.auth.authenticate import authenticate_session
from service.auth.service import Actor
from service.core.errors import Forbidden, Unauthorized
from service.ui import sessions
from service.web.container import SessionDep, services
from service.web.overload import learn_team

_WHAT = {"member": "launch and cancel jobs", "admin": "manage templates and tokens"}
MAX_FORM_FIELDS = 300


class SignInRequired(Exception):
    """No valid session: pages redirect to the sign-in page, scripts get a 401."""


class StaleForm(Forbidden):
    title, slug = "Form expired", "stale-form"


@dataclass(frozen=True)
class UiUser:
    actor: Actor
    csrf: str

    def can(self, role: str) -> bool:
        return self.actor.can(role)


def ui_user(request: Request, session: SessionDep) -> UiUser:
    key = sessions.signing_key(request)
    data = sessions.read_session(key, request.cookies.get(sessions.SESSION_COOKIE),
                                 services(request).ui_settings.session_max_age_seconds)
    if data is None:
        raise SignInRequired
    try:
        actor = authenticate_session(session, data.token_id)
    except Unauthorized:  # the token was revoked since sign-in
        raise SignInRequired from None
    learn_team(request, str(actor.team_id))   # its next requests take its team's turn
    request.state.ui_nonce = data.nonce
    request.state.ui_user = user = UiUser(actor, sessions.csrf_token(key, data.nonce))
    return user


User = Annotated[UiUser, Depends(ui_user)]


def require(user: UiUser, role: str) -> None:
    if not user.can(role):
        raise Forbidden(f"you are signed in with a {user.actor.role} token; to {_WHAT[role]} "
                        f"sign in with a {role} token of team {user.actor.team}")


def member(user: User) -> UiUser:
    require(user, "member")
    return user


Member = Annotated[UiUser, Depends(member)]


async def read_form(request: Request) -> FormData:
    return await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)


async def verified_form(request: Request, user: User) -> FormData:
    """The posted form, once its CSRF token matches this session's."""
    form = await read_form(request)
    if not sessions.csrf_ok(sessions.signing_key(request), request.state.ui_nonce, form.get("csrf")):
        raise StaleForm("this form did not come from your current session (it may be from before you "
                        "signed in again); reload the page and submit it again")
    return form


Form = Annotated[FormData, Depends(verified_form)]
