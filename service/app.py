"""create_app(): the FastAPI app. The lifespan owns the engine, the backends
and the controller election (Polar's app.py, Prefect's loop services): every
process serves the API; the one process per database that wins the election
also runs the lifecycle loops (service.lifecycle.controller)."""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated

import anyio
from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.orm import Session, sessionmaker

from service import slices
from service.auth.cache import TokenCache
from service.auth.router import router as tokens_router
from service.auth.ui_sessions import stored_secret
from service.budgets.gate import BudgetGate
from service.budgets.metrics import TeamLimitsCollector, limits_by_team
from service.budgets.router import router as teams_router
from service.capacity.cache import TtlCache
from service.capacity.placement import Placement
from service.capacity.planner import Planner
from service.capacity.queue_cache import QueueCache, launch_slots
from service.capacity.queue_process import QueueProcess
from service.capacity.queue_router import router as queue_router
from service.capacity.router import router as capacity_router
from service.cost import prices
from service.cost.estimate import Pricer
from service.interop.import_workers import ImportWorkers
from service.interop.router import router as interop_router
from service.jobs import epochs
from service.jobs.compile_reuse import CompileReuse
from service.jobs.epochs_router import router as epochs_router
from service.jobs.router import router as jobs_router
from service.jobs.settings import JobSettings
from service.jobs.submitter import JobSubmitter
from service.lifecycle.continuation import OutputPlace
from service.lifecycle.controller import Controller
from service.lifecycle.engine import Engine
from service.lifecycle.leader import leadership_for
from service.lifecycle.loop import TickStats
from service.lifecycle.protocol import Backend, UploadsModels
from service.lifecycle.retries import RetryLimits
from service.lifecycle.services import ServiceFactory
from service.lifecycle.wake import Waker
from service.logs.fanout import Hub
from service.logs.router import router as logs_router
from service.model_uploads.queue import UploadQueue
from service.model_uploads.uploads import ModelUploads
from service.persistence.locks import secure_database_file, sqlite_path
from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory
from service.slices import Settings, get_settings, make_backends
from service.sweeps.launcher import SweepLauncher
from service.sweeps.router import router as sweeps_router
from service.templates.cache import TemplateCache
from service.templates.router import router as templates_router
from service.ui import mount as mount_ui
from service.ui.feed import JobFeed
from service.ui.sessions import SigningKey
from service.ui.settings import UiSettings
from service.usage.recompute import UsageRecompute
from service.usage.router import router as usage_router
from service.web import docs as apidocs
from service.web import problem_types, problems
from service.web.body_limits import BodySizeLimitMiddleware
from service.web.container import Services, services
from service.web.gil import GilSwitch
from service.web.observability import Metrics, RequestContextMiddleware, metrics_access
from service.web.overload import AdmissionMiddleware
from service.web.protocol import STOPPING
from service.webhooks.dispatcher import Dispatcher
from service.webhooks.limits import WebhookLimits
from service.webhooks.outbox import Outbox
from service.webhooks.router import router as webhooks_router

log = logging.getLogger("trainjobs")

DESCRIPTION = """
Launch distributed TensorFlow training from templates, on Vertex AI or on this machine.

1. `GET /v1/templates` lists job templates (`mwms-demo` is there from the start).
2. `POST /v1/jobs` with `{"template": "mwms-demo"}` launches one; add `?dry_run=true` to see the
   Vertex AI CustomJob and each replica's TF_CONFIG without launching.
3. `GET /v1/jobs/{id}` follows it; `/events` is its history; `/logs` its replicas' logs.

Errors are RFC 9457 problem+json: `errors` names each bad field and how to fix it.
"""


def _hoist(app: FastAPI, *routers: APIRouter) -> None:
    """Put these routers' routes first on the app's own router, as plain routes. An included
    router is matched through FastAPI's included-router layer, which costs about a tenth of
    a submit's CPU per request (bench/submit_vs_floor.py --profile); these routers have no
    dependencies, prefixes or responses of their own to add at inclusion (their routes
    already carry their full paths and tags), so serving them directly changes nothing else.
    Called before any route is read (the OpenAPI document is built on first use, after
    create_app), through the router's public route list."""
    for router in routers:
        assert not router.dependencies and not router.responses, "include this router instead"
    app.router.routes[0:0] = [route for router in routers for route in router.routes]


@dataclass(frozen=True)
class _Parts:
    """What create_app makes once, before the lifespan: none of it opens a connection."""

    settings: Settings
    pricer: Pricer
    lifecycle: Engine
    jobs: JobSettings
    ui: UiSettings
    webhook_limits: WebhookLimits
    template_cache: TemplateCache
    metrics: Metrics
    team_limits: TeamLimitsCollector
    gil: GilSwitch


def create_app(settings: Settings | None = None, *, backends: Mapping[str, Backend] | None = None) -> FastAPI:
    """The app: its parts, then (when it starts) its lifespan, its middleware, its routes."""
    settings = settings or get_settings()
    if settings.workers > 1:
        # A spawned worker of `serve --workers N` starts with no logging set up.
        from service.core.logging_setup import configure_logging
        configure_logging(settings.log_level, settings.log_format)
    parts = _parts(settings)
    app = FastAPI(title="trainjobs", version="0.1.0", description=DESCRIPTION,
                  lifespan=lambda app: _lifespan(app, parts, backends),
                  docs_url=None, redoc_url=None, generate_unique_id_function=apidocs.operation_id,
                  openapi_tags=[{"name": t} for t in apidocs.TAG_ORDER])
    problems.install(app, max_problems=settings.max_problems)
    apidocs.install(app)  # /docs, /redoc and / with assets served from here
    app.include_router(problem_types.router)  # /problems/{type}: the page each problem's `type` names
    _add_middleware(app, settings, parts.metrics, parts.gil)
    _add_routers(app)
    _add_ops_routes(app, settings, parts.metrics)
    return app


def _parts(settings: Settings) -> _Parts:
    # A bad TRAINJOBS_PRICE_FILE stops the start here (prices.PriceFileError says what to fix).
    pricer = Pricer(prices.load(settings.price_file), settings.resolved_cost_region())
    lifecycle = Engine(progress_max_bytes=settings.progress_max_bytes, error_max_bytes=settings.error_max_bytes,
                       retry_limits=RetryLimits(settings.retry_max_attempts, settings.retry_max_backoff_seconds))
    jobs_cfg = slices.job_settings(settings)
    # Each epoch a job reports is kept for the charts, in the same transaction as the report.
    lifecycle.listen(epochs.listener(jobs_cfg.epochs))
    # Webhook deliveries go into an outbox in the same transaction; the controller sends them.
    webhook_limits = slices.webhook_limits(settings)
    lifecycle.listen(Outbox(webhook_limits).on_change)
    metrics = Metrics()
    team_limits = TeamLimitsCollector()
    metrics.private_registry.register(team_limits)
    return _Parts(settings, pricer, lifecycle, jobs_cfg, slices.ui_settings(settings), webhook_limits,
                  TemplateCache(settings.template_cache_size), metrics, team_limits,
                  GilSwitch(settings.gil_switch_interval_ms / 1000, settings.gil_fast_switch_streams))


@asynccontextmanager
async def _lifespan(app: FastAPI, parts: _Parts, backends: Mapping[str, Backend] | None):
    """The engines, the backends, the controller and the typed container, for as long as the
    app serves. Whatever was made is undone in reverse order (the ExitStack), also when a later
    step of the start fails: the controller stops before the backends close, and they close
    before the engines are disposed."""
    from service.web import supervision
    supervision.die_with_supervisor()
    with ExitStack() as stack:
        wired = _wire(stack, parts, backends)
        wired.install(app)
        # Set when the server begins to stop (service/web/protocol.py): streams end at once
        # with a `reconnect` event, so open followers and tabs never hold the exit.
        stopping_task = asyncio.get_running_loop().create_task(_end_streams(wired.log_hub, wired.stopping))
        if parts.settings.run_reconciler:
            wired.controller.start()
        try:
            yield {STOPPING: wired.stopping}
        finally:
            wired.stopping.set()
            stopping_task.cancel()


def _wire(stack: ExitStack, parts: _Parts, backends: Mapping[str, Backend] | None) -> Services:
    settings = parts.settings
    engine, health_engine, session_factory = _databases(stack, settings)
    # The GIL's switch interval: short while many log streams are open (service/web/gil.py).
    parts.gil.start()
    stack.callback(parts.gil.stop)
    # Requests hold a thread and a connection while they run, and while they wait elsewhere without
    # their slot (service/core/off_seat.py): both are sized for the two together.
    in_flight = settings.max_concurrent_requests + settings.max_requests_waiting_elsewhere
    anyio.to_thread.current_default_thread_limiter().total_tokens = in_flight + 16
    # The request threads of the busiest routes (service/web/request_threads.py): one per request.
    request_threads = ThreadPoolExecutor(in_flight, "trainjobs-request")
    stack.callback(request_threads.shutdown, wait=True)
    # Import text is parsed in worker processes, started on first use (service/interop/import_workers.py).
    import_workers = ImportWorkers(settings)
    stack.callback(import_workers.close)
    built = _start_backends(stack, settings, backends)
    # Where each keeps job outputs: a preempted job goes on where its checkpoints are (lifecycle/continuation.py).
    parts.lifecycle.output_places = {name: OutputPlace(b.capabilities.output_root, b.capabilities.shared_output)
                                     for name, b in built.items()}
    # Every submit (API, UI, sweeps, relaunch) goes through it; it wakes the controller (lifecycle.wake).
    waker = Waker()
    capacity = slices.capacity_settings(settings)
    capacity_cache = TtlCache(capacity.queue_cache_seconds)
    planner = Planner(capacity)   # one: the controller acts on what the queue's readers are shown
    planner.slots = {name: b.capabilities.max_running for name, b in built.items()}   # plans across backends
    submitter = JobSubmitter(built, parts.lifecycle, template_cache=parts.template_cache, pricer=parts.pricer,
                             default_backend=parts.jobs.default_backend, waker=waker,
                             placement=Placement(capacity, capacity_cache),
                             compile_reuse=CompileReuse(settings.compile_cache_bytes), settings=parts.jobs)
    controller = _controller(parts, built, engine, session_factory, submitter, planner)
    stack.callback(controller.stop)   # first of all at the end: nothing is launched or polled after
    waker.controller = controller
    parts.metrics.jobs_by_state_source = lambda: _jobs_by_state(session_factory)
    parts.team_limits.source = lambda: limits_by_team(session_factory, parts.pricer.table.currency)
    log_cfg, ui_cfg = slices.log_settings(settings), parts.ui
    # Each backend's queue, asked by a thread of its own and computed in a worker process (no GIL of
    # this process held), both started by the first read (capacity/queue_cache.py, queue_process.py).
    queue = QueueCache(planner, session_factory, capacity_cache, wait_seconds=capacity.queue_wait_seconds,
                       busy_share=capacity.queue_busy_share, slots=partial(launch_slots, built),
                       worker=QueueProcess(settings.database_url, capacity,
                                           timeout_seconds=capacity.queue_compute_timeout_seconds))
    stack.callback(queue.close)
    return Services(
        lifecycle=parts.lifecycle, pricer=parts.pricer, template_cache=parts.template_cache,
        token_cache=TokenCache(settings.auth_cache_size, settings.auth_cache_seconds), metrics=parts.metrics,
        job_settings=parts.jobs, log_settings=log_cfg, ui_settings=ui_cfg,
        interop_settings=slices.interop_settings(settings), budget_settings=slices.budget_settings(settings),
        sweep_limits=slices.sweep_limits(settings), webhook_limits=parts.webhook_limits,
        engine=engine, health_engine=health_engine, session_factory=session_factory, request_threads=request_threads,
        backends=built, controller=controller, waker=waker, submitter=submitter,
        import_workers=import_workers, log_hub=Hub(session_factory, log_cfg.fanout),
        stopping=asyncio.Event(), ui_feed=JobFeed(session_factory, ui_cfg.stream_interval_seconds),
        ui_key=SigningKey(ui_cfg.session_secret, partial(stored_secret, session_factory)),
        capacity_settings=capacity, capacity_cache=capacity_cache,
        queue=queue)


def _databases(stack: ExitStack, settings: Settings) -> tuple[SqlEngine, SqlEngine, sessionmaker[Session]]:
    # Sized from the request limit (service/web/overload.py): a running request never waits
    # for a connection or a thread that another request holds.
    engine = make_engine(settings.database_url, pool_size=settings.max_concurrent_requests
                         + settings.max_requests_waiting_elsewhere + 8,
                         pool_timeout=settings.db_pool_timeout_seconds)
    stack.callback(engine.dispose)
    health_engine = make_engine(settings.database_url, pool_size=1, pool_timeout=2.0)
    stack.callback(health_engine.dispose)
    if engine.dialect.name == "sqlite":
        secure_database_file(sqlite_path(settings.database_url))
    return engine, health_engine, make_session_factory(engine)


def _start_backends(stack: ExitStack, settings: Settings,
                    backends: Mapping[str, Backend] | None) -> dict[str, Backend]:
    """The enabled backends (service/backends/registry.py), each started as a client; each
    started one is closed at the end."""
    built = dict(backends) if backends is not None else make_backends(settings)
    for backend in built.values():
        backend.start_client()
        stack.callback(backend.close)
    return built


def _controller(parts: _Parts, built: Mapping[str, Backend], engine: SqlEngine,
                session_factory: sessionmaker[Session], submitter: JobSubmitter, planner: Planner) -> Controller:
    """The controller this process stands for election with, and the loop services it runs
    when elected (webhook deliveries, sweeps, model uploads) beside its backend loops."""
    settings, lifecycle = parts.settings, parts.lifecycle
    # A job with a model upload queues it in the transaction that records SUCCEEDED, where its
    # backend uploads models (the UploadsModels role); the controller runs the uploads.
    model_clients = {name: b.upload_client() for name, b in built.items() if isinstance(b, UploadsModels)}
    lifecycle.listen(UploadQueue(model_clients).on_change)
    services: list[ServiceFactory] = [
        lambda fence: Dispatcher(session_factory, lifecycle, parts.webhook_limits, fence=fence),
        lambda fence: SweepLauncher(session_factory, lifecycle, submitter, interval=settings.sweep_interval_seconds,
                                    batch_size=settings.sweep_batch_size, fence=fence),
        lambda fence: ModelUploads(session_factory, model_clients, slices.upload_settings(settings)),
        lambda fence: UsageRecompute(session_factory, slices.usage_settings(settings), fence=fence),
    ]
    metrics = parts.metrics

    def record_tick(stats: TickStats) -> None:
        metrics.reconcile_ticks.inc()
        metrics.reconcile_errors.inc(stats.errors)
        metrics.reconcile_seconds.observe(stats.seconds)

    leadership = leadership_for(settings.database_url, engine, settings.controller_lease_seconds)
    return Controller(leadership, built, session_factory, lifecycle, interval=settings.reconcile_interval_seconds,
                      batch_size=settings.reconcile_batch_size, election_interval=settings.election_interval_seconds,
                      wake_gap=settings.reconcile_wake_gap_seconds, replan_seconds=settings.reconcile_replan_seconds,
                      on_tick=record_tick, services=services,
                      gate=BudgetGate(parts.pricer.table.currency), planner=planner,
                      preempt_grace=planner.settings.grace_seconds)


def _add_middleware(app: FastAPI, settings: Settings, metrics: Metrics, gil: GilSwitch) -> None:
    # Outermost last: request context, then bodies read (before a slot is taken), then admission.
    app.add_middleware(AdmissionMiddleware, max_requests=settings.max_concurrent_requests,
                       max_elsewhere=settings.max_requests_waiting_elsewhere, remember_credentials=settings.auth_cache_size,
                       queue_seconds=settings.request_queue_seconds, max_streams=settings.max_streams,
                       stream_queue_seconds=settings.stream_queue_seconds,
                       max_streams_per_caller=settings.max_streams_per_caller,
                       on_refuse=lambda kind: metrics.overload_refusals.labels(kind).inc(),
                       on_start=lambda mw: metrics.watch_admission(mw), on_streams=gil.streams)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes,
                       timeout=settings.http_body_timeout_seconds,
                       min_rate=settings.http_body_min_bytes_per_second,
                       buffer_bytes=settings.http_body_buffer_bytes, max_seconds=settings.http_body_max_seconds,
                       on_start=metrics.watch_bodies)
    app.add_middleware(RequestContextMiddleware, metrics=metrics)


def _add_routers(app: FastAPI) -> None:
    # Routes are matched in this order, one by one: the busiest first (a submit, a job, its
    # logs). The docs keep their own order (openapi_tags).
    _hoist(app, jobs_router, logs_router)
    app.include_router(interop_router)  # before templates_router: /v1/templates:import is no template name
    app.include_router(templates_router)
    app.include_router(tokens_router)
    app.include_router(epochs_router)
    app.include_router(webhooks_router)
    app.include_router(teams_router)
    app.include_router(capacity_router)
    app.include_router(usage_router)
    app.include_router(sweeps_router)
    app.include_router(queue_router)
    mount_ui(app)  # the web UI under /ui


def _add_ops_routes(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    # Health checks answer whatever the load: no request slot, no shared thread, their own
    # database connection.
    health_threads = anyio.CapacityLimiter(2)
    metrics_token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""

    @app.get("/healthz", tags=["ops"], operation_id="ops_healthz", summary="The process is up")
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], operation_id="ops_readyz", summary="The database answers",
             responses={503: {"description": "The database does not answer"}})
    async def readyz(request: Request, authorization: Annotated[str | None, Header(include_in_schema=False)] = None):
        if not await anyio.to_thread.run_sync(_database_answers, services(request).health_engine,
                                           limiter=health_threads):
            return JSONResponse({"status": "unavailable", "database": "down"}, status_code=503)
        # The pid only for the operator's scrape (the metrics token): it tells workers apart.
        out = {"status": "ready", "database": "ok", "controller": services(request).controller.active}
        return out | {"pid": os.getpid()} if metrics_access(metrics_token, authorization) else out

    @app.get("/metrics", tags=["ops"], operation_id="ops_metrics", summary="Prometheus metrics",
             response_class=Response,
             description="Process metrics for anyone; request counts by route and job counts "
                         "(`trainjobs_jobs`) only with `Authorization: Bearer <TRAINJOBS_METRICS_TOKEN>`.")
    def prometheus_metrics(authorization: Annotated[str | None, Header(include_in_schema=False)] = None):
        private = metrics_access(metrics_token, authorization)
        return Response(metrics.exposition(private), media_type=CONTENT_TYPE_LATEST)


def _database_answers(engine: SqlEngine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


async def _end_streams(hub: Hub, stopping: asyncio.Event) -> None:
    await stopping.wait()
    hub.stop()


def _jobs_by_state(session_factory) -> dict[tuple[str, str], int]:
    with session_factory() as session:
        rows = session.execute(select(Job.backend, Job.state, func.count()).group_by(Job.backend, Job.state))
        return {(backend, state): n for backend, state, n in rows}
