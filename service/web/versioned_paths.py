"""`POST /jobs` and the other unversioned paths: a 404 problem naming the path to use.

Why not aliases or a redirect (docs/http.md, "Unversioned paths"): an alias would make
`/jobs` mean whatever the newest version means, so an integration written against it
would change behaviour, silently, the day a `/v2` appears; a 308 keeps the method and
body, but curl (without -L) and httpx do not follow it and `curl --fail-with-body` takes a
3xx for success, so a script would go on with a redirect's body as if it were the job.
A 404 with the path to use fails loudly once and is fixed in one edit. Nothing is
disclosed: the route map is public (/openapi.json), so no token is asked first."""
from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Match

VERSION = "/v1"


def versioned_path(request: Request) -> str | None:
    """The current version's path for this request, if a route of the app serves it."""
    scope = request.scope
    root = scope.get("root_path", "")
    path = scope["path"][len(root):] if root and scope["path"].startswith(root) else scope["path"]
    if path.startswith(VERSION + "/") or path == VERSION or path in ("", "/"):
        return None
    candidate = {**scope, "path": root + VERSION + path, "raw_path": None}
    app = scope.get("app")
    router = getattr(app, "router", None)
    if router is None or not any(route.matches(candidate)[0] != Match.NONE for route in router.routes):
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    return VERSION + path + (f"?{query}" if query else "")
