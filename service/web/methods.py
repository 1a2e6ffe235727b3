"""`Allow` is per path, not per route (RFC 9110, 10.2.1 and 15.5.6).

Starlette matches routes one by one: a path with a GET route and a POST route is two
routes, and a method neither takes is answered 405 by the first route whose path matched,
with that route's methods alone (`OPTIONS /v1/jobs` answered `Allow: POST`; the path also
has GET). Here, once for the whole app, a 405 lists every method of every route at that
path, and OPTIONS, which no route declares, is answered for any path that exists: 204 with
that `Allow` (RFC 9110, 9.3.7), without a token (it says what the public OpenAPI document
says, and nothing else). A path that does not exist stays 404. docs/http.md, "Methods"."""
from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

# The order in which `Allow` lists them (the usual one, then anything else alphabetically).
_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed(routes, path: str) -> set[str]:
    """Every method some route takes at this path (relative to the app's root path), in
    included routers (FastAPI keeps them as one route each) and mounted routers too."""
    methods: set[str] = set()
    for route in iter_route_contexts(routes):
        if isinstance(route.original_route, Mount):
            mount = route.original_route
            inner = getattr(mount, "routes", None)
            prefix = mount.path.rstrip("/")
            if inner and path.startswith(prefix + "/"):
                methods |= allowed(inner, path[len(prefix):])
            continue
        regex = getattr(route, "path_regex", None)
        if route.methods and regex is not None and regex.match(path):
            methods |= set(route.methods)
    return methods


def route_path(scope) -> str:
    """The path the app's own router matches (a route inside a mount sees a longer root path)."""
    root = scope.get("app_root_path", scope.get("root_path", ""))
    path = scope.get("path", "")
    return path[len(root):] if root and path.startswith(root) else path


def allow_header(methods: set[str]) -> str:
    methods = methods | {"OPTIONS"}
    return ", ".join(sorted(methods, key=lambda m: (_ORDER.index(m) if m in _ORDER else len(_ORDER), m)))


def answer_options(request: Request) -> Response | None:
    """A 405 raised for OPTIONS at a path that exists: 204 with `Allow` (else None)."""
    methods = allowed(request.app.router.routes, route_path(request.scope))
    if request.method == "OPTIONS" and methods:
        return Response(status_code=204, headers={"Allow": allow_header(methods)})
    return None


def allow_for(request: Request) -> str:
    """The `Allow` of a 405 at this request's path ("" where no route takes the path)."""
    methods = allowed(request.app.router.routes, route_path(request.scope))
    return allow_header(methods) if methods else ""
