"""The UI's route class: the same domain errors as the API, answered as HTML pages
(problem+json is for API clients), and a sign-in redirect for pages."""
from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, RedirectResponse
from fastapi.routing import APIRoute

from service.core.errors import DomainError
from service.ui.deps import SignInRequired
from service.ui.render import render
from service.web.database_errors import database_unavailable
from service.web.security_headers import SECURITY_HEADERS

log = logging.getLogger("trainjobs.ui")


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def sign_in_redirect(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/ui/login?next={quote(target, safe='')}", status_code=303,
                            headers=SECURITY_HEADERS)


def _error_page(request: Request, status: int, title: str, detail: str, problems=()):
    if not _wants_html(request):
        text = "\n".join([f"{title}: {detail}", *problems])
        return PlainTextResponse(text, status_code=status, headers=SECURITY_HEADERS)
    return render(request, "error.html", status, user=getattr(request.state, "ui_user", None), title=title,
                  detail=detail, problems=list(problems))


def _validation_problems(exc: RequestValidationError) -> list[str]:
    out = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e.get("loc", ())[1:]) or "request"
        out.append(f"{where}: {e.get('msg', 'invalid')}")
    return out


class HtmlRoute(APIRoute):
    def get_route_handler(self):
        original = super().get_route_handler()

        async def handler(request: Request):
            try:
                return await original(request)
            except SignInRequired:
                if _wants_html(request):
                    return sign_in_redirect(request)
                return PlainTextResponse("sign in at /ui/login", status_code=401, headers=SECURITY_HEADERS)
            except DomainError as e:
                resp = _error_page(request, e.status, e.title, e.detail,
                                   [f"{p.field}: {p.message}" + (f" ({p.fix})" if p.fix else "") for p in e.problems])
                resp.headers.update(e.headers)
                return resp
            except RequestValidationError as e:
                path_error = any(err.get("loc", ("",))[0] == "path" for err in e.errors())
                if path_error:
                    return _error_page(request, 404, "Not found", "no such page")
                return _error_page(request, 422, "Invalid request", "the address has a value this page cannot use",
                                   _validation_problems(e))
            except Exception as e:
                # The database down is a 503 page; anything else goes on to the app's handlers.
                if not database_unavailable(e):
                    raise
                log.error("database unavailable: %s", e.__class__.__name__)
                resp = _error_page(request, 503, "Database unavailable",
                                   "the database did not answer; retry in a few seconds")
                resp.headers["Retry-After"] = "5"
                return resp
        return handler
