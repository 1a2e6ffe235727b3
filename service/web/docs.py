"""The docs UI (Swagger UI), ReDoc and a landing page at `/`, all served by this
process: the JavaScript and CSS come from the fastapi-offline package, so an
internal deployment without internet access still shows its docs. Also the
operation-id rule for routes that set none."""
from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.routing import Match

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
# The web UI; the landing page links it when the app serves it (service.ui.mount).
UI_PATH = "/ui"
# ReDoc's bundle shows Redocly's logo from Redocly's CDN, unconditionally (no option turns it
# off): the bundle is served with that one address pointed at our own icon instead. Relative,
# so it resolves under any root path (the page is <root>/redoc).
REDOC_BUNDLE = "redoc.standalone.js"
REDOC_REMOTE_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_LOCAL_LOGO = ASSETS_URL.lstrip("/").encode() + b"/favicon.png"


# The order of the groups in /docs and /redoc: the order in which a newcomer reads (jobs, the
# templates they run from, their logs, then sweeps over them, ...; importing from AI
# Platform last), whatever the order in which routes are matched (app.py).
TAG_ORDER = ("jobs", "templates", "logs", "sweeps", "tokens", "teams", "queue", "usage", "capacity", "webhooks",
             "ops", "interop")


def operation_id(route: APIRoute) -> str:
    """`<tag>_<function>` (e.g. ops_healthz): stable names for generated clients.
    Routes of the API set theirs explicitly (jobs_create, ...)."""
    return f"{route.tags[0]}_{route.name}" if route.tags else route.name


def install(app: FastAPI) -> None:
    """Call with an app made with docs_url=None, redoc_url=None."""
    redoc_bundle = (ASSETS / REDOC_BUNDLE).read_bytes().replace(REDOC_REMOTE_LOGO, REDOC_LOCAL_LOGO)

    # Before the mount: matched first.
    @app.get(f"{ASSETS_URL}/{REDOC_BUNDLE}", include_in_schema=False)
    def redoc_js() -> Response:
        return Response(redoc_bundle, media_type="text/javascript; charset=utf-8")

    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")

    def root(request: Request) -> str:
        return request.scope.get("root_path", "").rstrip("/")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        base = root(request)
        return framed_off(get_swagger_ui_html(
            openapi_url=f"{base}{app.openapi_url}", title=f"{app.title} - API docs",
            oauth2_redirect_url=f"{base}/docs/oauth2-redirect",
            swagger_js_url=f"{base}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{base}{ASSETS_URL}/favicon.png",
            # validatorUrl: Swagger UI would otherwise send the schema to validator.swagger.io.
            # persistAuthorization off: a token pasted into Authorize is not kept in the
            # browser's localStorage, where any later script of this origin could read it.
            swagger_ui_parameters={"persistAuthorization": False, "validatorUrl": None,
                                   "displayOperationId": True}))

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return framed_off(get_swagger_ui_oauth2_redirect_html())

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        base = root(request)
        return framed_off(get_redoc_html(openapi_url=f"{base}{app.openapi_url}",
                                         title=f"{app.title} - API reference",
                                         redoc_js_url=f"{base}{ASSETS_URL}/redoc.standalone.js",
                                         redoc_favicon_url=f"{base}{ASSETS_URL}/favicon.png",
                                         with_google_fonts=False))

    @app.get("/", include_in_schema=False)
    def landing(request: Request) -> HTMLResponse:
        return HTMLResponse(landing_page(app.title, app.version, root(request), _ui_path(app),
                                         str(request.base_url).rstrip("/")))


def _ui_path(app: FastAPI) -> str | None:
    scope = {"type": "http", "path": UI_PATH, "root_path": "", "method": "GET", "headers": [], "query_string": b""}
    return UI_PATH if any(route.matches(scope)[0] != Match.NONE for route in app.router.routes) else None


_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def framed_off(page: HTMLResponse) -> HTMLResponse:
    """The UI's headers on a docs page (service/ui/render.py): never framed (clickjacking a
    signed-in operator's Try-it-out), scripts only from here plus the page's own inline
    start-up script, named by its hash. Styles may be inline: both bundles inject theirs."""
    from service.web.security_headers import SECURITY_HEADERS

    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(m.encode()).digest()).decode()}'"
                      for m in _INLINE_SCRIPT.findall(bytes(page.body).decode()))
    csp = (f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
           "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
           "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
    page.headers.update({**SECURITY_HEADERS, "Content-Security-Policy": csp})
    return page


def landing_page(title: str, version: str, base: str, dashboard: str | None, public_url: str) -> str:
    links = [("API docs", "/docs", "try every route; click Authorize and paste a token"),
             ("API reference", "/redoc", "the same schema as a readable reference"),
             ("OpenAPI schema", "/openapi.json", "for code generators (operation ids like jobs_create)"),
             ("Problem types", "/problems", "what each error answer's type means, and what to do"),
             ("Liveness", "/healthz", "the process is up"),
             ("Readiness", "/readyz", "the database answers"),
             ("Metrics", "/metrics", "Prometheus")]
    if dashboard:
        links.insert(0, ("Web UI", dashboard, "your team's jobs live, launch from a template (sign in with a token)"))
    items = "\n".join(f'<li><a href="{html.escape(base + href)}">{html.escape(name)}</a> '
                      f"<span>{html.escape(what)}</span></li>" for name, href, what in links)
    t = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>{t}</title>
<link rel="icon" href="{html.escape(base)}{ASSETS_URL}/favicon.png">
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 3rem auto; padding: 0 1rem; color: #222; }}
h1 {{ margin-bottom: 0; }} .v {{ color: #777; }} li {{ margin: .35rem 0; }} li span {{ color: #666; }}
pre {{ background: #f4f4f4; padding: .8rem; overflow-x: auto; }}
@media (prefers-color-scheme: dark) {{
  body {{ background: #15171a; color: #e4e6ea; }} a {{ color: #8ab4f8; }} .v, li span {{ color: #9aa0a6; }}
  pre {{ background: #23262b; }}
}}
</style></head><body>
<h1>{t} <span class="v">{html.escape(version)}</span></h1>
<p>Launch and follow distributed TensorFlow training from templates, on Vertex AI or on the service's machine.</p>
<ul>
{items}
</ul>
<h2>From a terminal</h2>
<pre>trainjobs login --url {html.escape(public_url)}   # paste your token
trainjobs templates list
trainjobs jobs submit mwms-demo -p epochs=3 --follow
trainjobs jobs list</pre>
<p>Or from Python: <code>trainjobs_client.Client().submit("mwms-demo")</code>. Every error is
RFC 9457 problem+json naming each bad field and how to fix it.</p>
</body></html>
"""
