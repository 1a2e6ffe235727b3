"""The process's services, as one typed object: what routers, the UI, the log streams and
the request threads read of the process, instead of attributes set on `app.state` one by one.

service/app.py (the composition root) builds one `Services` when the app starts (its
lifespan: the engine, the backends and the controller exist only then) and stores it once on
the app; everything else reads it through `services(request)` (or the `ServicesDep`
dependency), so the type checker knows each attribute. Settings come as each package's slice
(service/slices.py), not as the whole Settings.

The field types name domain classes for the type checker only: this module sits in the web
layer, below the domains that read it (pyproject.toml's import-linter contracts), and
imports none of them when it runs."""
from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends
from sqlalchemy.engine import Engine as SqlEngine
from sqlalchemy.orm import Session, sessionmaker
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from service.persistence.session import unit_of_work
from service.web.observability import Metrics

if TYPE_CHECKING:
    from service.auth.cache import TokenCache
    from service.budgets.settings import BudgetSettings
    from service.capacity.cache import TtlCache
    from service.capacity.queue_cache import QueueCache
    from service.capacity.settings import CapacitySettings
    from service.cost.estimate import Pricer
    from service.interop.import_workers import ImportWorkers
    from service.interop.settings import InteropSettings
    from service.jobs.settings import JobSettings
    from service.jobs.submitter import JobSubmitter
    from service.lifecycle.controller import Controller
    from service.lifecycle.engine import Engine
    from service.lifecycle.protocol import Backend
    from service.lifecycle.wake import Waker
    from service.logs.fanout import Hub
    from service.logs.settings import LogSettings
    from service.sweeps.service import SweepLimits
    from service.templates.cache import TemplateCache
    from service.ui.feed import JobFeed
    from service.ui.sessions import SigningKey
    from service.ui.settings import UiSettings
    from service.webhooks.limits import WebhookLimits


@dataclass(frozen=True, eq=False)
class Services:
    # Made by create_app, once per app.
    lifecycle: Engine                  # the one writer of job states (service/lifecycle/engine.py)
    pricer: Pricer
    template_cache: TemplateCache
    token_cache: TokenCache
    metrics: Metrics
    # Each package's settings.
    job_settings: JobSettings
    log_settings: LogSettings
    ui_settings: UiSettings
    interop_settings: InteropSettings
    budget_settings: BudgetSettings
    sweep_limits: SweepLimits
    webhook_limits: WebhookLimits
    # Started by the lifespan, stopped when it ends.
    engine: SqlEngine
    health_engine: SqlEngine           # /readyz's own connection: it answers whatever the load
    session_factory: sessionmaker[Session]
    request_threads: ThreadPoolExecutor  # the busiest routes' threads (service/web/request_threads.py)
    backends: Mapping[str, Backend]
    controller: Controller
    waker: Waker                       # wakes the controller after a commit (service/lifecycle/wake.py)
    submitter: JobSubmitter            # the one way a job is submitted (service/jobs/submitter.py)
    import_workers: ImportWorkers      # the processes that parse import texts (service/interop/import_workers.py)
    log_hub: Hub                       # the shared log readers (service/logs/fanout.py)
    stopping: asyncio.Event            # set when the server begins to stop (service/web/protocol.py)
    ui_feed: JobFeed                   # the UI's live job feed
    ui_key: SigningKey                 # the UI's cookie-signing key
    capacity_settings: CapacitySettings  # shared capacity (service/capacity)
    capacity_cache: TtlCache           # the capacity domain's one cache: settings and queues (capacity/cache.py)
    queue: QueueCache                  # each backend's queue as members read it (service/capacity/queue_cache.py)

    def install(self, app: Starlette) -> None:
        """Store these on `app` (once, by service/app.py)."""
        app.state.services = self


class NotStarted(RuntimeError):
    pass


def services(request: HTTPConnection) -> Services:
    """The app's services: the one typed way in (also a FastAPI dependency: ServicesDep)."""
    try:
        return request.app.state.services
    except AttributeError:
        raise NotStarted("the app has not started: its services exist once its lifespan runs "
                         "(use `with TestClient(app)`)") from None


ServicesDep = Annotated[Services, Depends(services)]


def get_session(request: HTTPConnection) -> Generator[Session, None, None]:
    with unit_of_work(services(request).session_factory) as session:
        yield session


# scope="function": commit before the response is sent, so a 2xx means it is stored
# (the default "request" scope runs this cleanup after the response).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
