"""Sign in with an API token, sign out."""
from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse
from markupsafe import Markup
from starlette.datastructures import FormData

from service.auth.service import resolve
from service.ui import sessions
from service.ui.deps import Form, read_form
from service.ui.render import render
from service.ui.routing import HtmlRoute
from service.web.container import SessionDep, services
from service.web.security_headers import SECURITY_HEADERS

router = APIRouter(prefix="/ui", route_class=HtmlRoute, include_in_schema=False)


def safe_next(target: str | None) -> str:
    """Only a path of this UI: a sign-in link must not send anyone elsewhere."""
    if not target or len(target) > 2000:
        return "/ui/jobs"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/ui") or target.startswith("//") or "\\" in target:
        return "/ui/jobs"
    if parts.path.rstrip("/") in ("/ui/login", "/ui/logout"):
        return "/ui/jobs"
    return target


def _secure(request: Request) -> bool:
    configured = services(request).ui_settings.secure_cookies
    return configured if configured is not None else request.url.scheme == "https"


def _cookie(response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path=sessions.COOKIE_PATH, httponly=True,
                        samesite="strict", secure=_secure(request))


def _sign_in_page(request: Request, next_url: str, *, error: str | None = None, status: int = 200):
    key = sessions.signing_key(request)
    signed = request.cookies.get(sessions.LOGIN_COOKIE)
    nonce = sessions.read_login_nonce(key, signed)
    if signed is None or nonce is None:   # no cookie, or one that is stale or not ours
        nonce, signed = sessions.new_login_nonce(key)
    resp = render(request, "login.html", status, next_url=next_url, error=error,
                  csrf=sessions.csrf_token(key, nonce))
    _cookie(resp, request, sessions.LOGIN_COOKIE, signed, sessions.LOGIN_MAX_AGE)
    return resp


@router.get("/login")
def login_page(request: Request, next: Annotated[str | None, Query(max_length=2000)] = None):
    return _sign_in_page(request, safe_next(next))


@router.post("/login")
def login(request: Request, session: SessionDep, form: Annotated[FormData, Depends(read_form)]):
    key = sessions.signing_key(request)
    nonce = sessions.read_login_nonce(key, request.cookies.get(sessions.LOGIN_COOKIE))
    next_url = safe_next(str(form.get("next") or ""))
    if not sessions.csrf_ok(key, nonce, form.get("csrf")):
        return _sign_in_page(request, next_url, status=403,
                             error="The sign-in form expired or came from elsewhere; enter your token again.")
    token = str(form.get("token") or "").strip()
    actor = resolve(session, token) if token and len(token) <= 512 else None
    if actor is None:
        return _sign_in_page(request, next_url, status=401,
                             error=Markup("Unknown or revoked token. Ask an admin of your team for one "
                                          "(they make it with <code>trainjobs tokens create</code>)."))
    resp = RedirectResponse(next_url, status_code=303, headers=SECURITY_HEADERS)
    _cookie(resp, request, sessions.SESSION_COOKIE, sessions.new_session(key, actor.token_id),
            services(request).ui_settings.session_max_age_seconds)
    resp.delete_cookie(sessions.LOGIN_COOKIE, path=sessions.COOKIE_PATH)
    return resp


@router.post("/logout")
def logout(request: Request, form: Form):
    resp = RedirectResponse("/ui/login", status_code=303, headers=SECURITY_HEADERS)
    resp.delete_cookie(sessions.SESSION_COOKIE, path=sessions.COOKIE_PATH, httponly=True, samesite="strict",
                       secure=_secure(request))
    return resp

