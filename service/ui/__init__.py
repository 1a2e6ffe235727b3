"""The web UI: server-rendered pages under /ui (see README, "The web UI")."""
from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles


def mount(app: FastAPI) -> None:
    """Add the UI's routes and static files to the app."""
    from service.ui import (
        routes_auth,
        routes_fallback,
        routes_jobs,
        routes_live,
        routes_queue,
        routes_templates,
    )
    from service.ui.render import STATIC

    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")
    for module in (routes_auth, routes_jobs, routes_live, routes_templates, routes_queue, routes_fallback):  # fallback last
        app.include_router(module.router)
