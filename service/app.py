"""create_app(): the FastAPI app. The lifespan owns the engine, the backends
and the reconciler (Polar's app.py, Prefect's loop services)."""
from __future__ import annotations

import logging
import os
from contextlib import asynccontextmanager
from typing import Mapping

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import func, select, text

from service import problems
from service.auth.router import router as tokens_router
from service.backends import make_backends
from service.backends.base import Backend
from service.config import Settings, get_settings
from service.controller import ControllerLock, Standby
from service.db import make_engine, make_session_factory
from service.jobs.epochs_router import router as epochs_router
from service.jobs.router import router as jobs_router
from service.logs.router import router as logs_router
from service.limits import BodySizeLimitMiddleware
from service.models import Job
from service.observability import Metrics, RequestContextMiddleware
from service.reconciler import Reconciler
from service.templates.router import router as templates_router
from service.ui import mount as mount_ui

log = logging.getLogger("trainjobs")

DESCRIPTION = """
Launch distributed TensorFlow training from templates, on Vertex AI or on this machine.

1. `GET /v1/templates` lists job templates (`mwms-demo` is there from the start).
2. `POST /v1/jobs` with `{"template": "mwms-demo"}` launches one; add `?dry_run=true` to see the
   Vertex AI CustomJob and each replica's TF_CONFIG without launching.
3. `GET /v1/jobs/{id}` follows it; `/events` is its history; `/logs` its replicas' logs.

Errors are RFC 9457 problem+json: `errors` names each bad field and how to fix it.
"""


def create_app(settings: Settings | None = None, *, backends: Mapping[str, Backend] | None = None) -> FastAPI:
    settings = settings or get_settings()
    if settings.controller_lock and settings.log_format == "json":
        # A spawned worker of `serve --workers N` starts with no logging set up.
        from service.observability import configure_logging
        configure_logging(settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine = make_engine(settings.database_url)
        app.state.engine = engine
        app.state.session_factory = make_session_factory(engine)
        built = dict(backends) if backends is not None else make_backends(settings)
        # With several workers only the holder of the controller lock runs the
        # reconciler and launches local replicas; a single process always does.
        lock = ControllerLock(settings.controller_lock_path) if settings.controller_lock else None
        controller = lock is None or lock.try_acquire()
        started = []
        try:
            for backend in built.values():
                start_client = getattr(backend, "start_client", None)
                backend.start() if controller or start_client is None else start_client()
                started.append(backend)
        except Exception:
            for backend in started:
                backend.close()
            engine.dispose()
            raise
        app.state.backends = built
        reconciler = Reconciler(app.state.session_factory, built, settings.reconcile_interval_seconds,
                                settings.reconcile_batch_size, on_tick=_record_tick)
        metrics.jobs_by_state_source = lambda: _jobs_by_state(app.state.session_factory)
        app.state.reconciler = reconciler
        app.state.reconciler_wake = reconciler.wake
        app.state.controller = controller

        def promote() -> None:
            for backend in built.values():
                if hasattr(backend, "start_client"):
                    backend.start()
            app.state.controller = True
            if settings.run_reconciler:
                reconciler.start()

        standby = None
        if controller:
            if settings.run_reconciler:
                reconciler.start()
        else:
            standby = Standby(lock, promote)
            standby.start()
        try:
            yield
        finally:
            if standby:
                standby.stop()
            reconciler.stop()
            for backend in built.values():
                backend.close()
            if lock:
                lock.release()
            engine.dispose()

    metrics = Metrics()

    def _record_tick(stats) -> None:
        metrics.reconcile_ticks.inc()
        metrics.reconcile_errors.inc(stats.errors)
        metrics.reconcile_seconds.observe(stats.seconds)

    app = FastAPI(title="trainjobs", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.metrics = metrics
    problems.install(app)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestContextMiddleware, metrics=metrics)
    app.include_router(templates_router)
    app.include_router(jobs_router)
    app.include_router(logs_router)
    app.include_router(tokens_router)
    app.include_router(epochs_router)
    mount_ui(app)  # the web UI under /ui

    @app.get("/healthz", tags=["ops"], summary="The process is up")
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], summary="The database answers")
    def readyz():
        try:
            with app.state.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception:
            return JSONResponse({"status": "unavailable", "database": "down"}, status_code=503)
        return {"status": "ready", "database": "ok", "controller": app.state.controller, "pid": os.getpid()}

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics", response_class=Response)
    def prometheus_metrics():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _jobs_by_state(session_factory) -> dict[tuple[str, str], int]:
    with session_factory() as session:
        rows = session.execute(select(Job.backend, Job.state, func.count()).group_by(Job.backend, Job.state))
        return {(backend, state): n for backend, state, n in rows}
