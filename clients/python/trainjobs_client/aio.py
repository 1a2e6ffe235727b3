"""The asynchronous client: the same operations as Client, awaited."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx

from trainjobs_client import _base, _ops
from trainjobs_client._ops import Applied, Call, JobRef, Op, SweepRef, T
from trainjobs_client.config import Config
from trainjobs_client.errors import ConnectionFailed, ServiceUnavailable, WaitTimeout
from trainjobs_client.models import (
    BackendQueue,
    ImportedTemplate,
    Job,
    JobEvent,
    JobPreview,
    JobState,
    JobSummary,
    LogEnd,
    LogLine,
    Sweep,
    SweepSummary,
    TeamLimits,
    TeamUsage,
    Template,
    TemplateSummary,
    TemplateVersion,
    TokenInfo,
)


class AsyncClient:
    """Like Client, for asyncio: `async with AsyncClient() as c: job = await c.submit(...)`."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 retries: int = 4, backoff: float = 0.25, reconnect_for: float | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        self._opts = _base.options(url, token, timeout, retries, backoff, reconnect_for)
        self._http = httpx.AsyncClient(**_base.http_args(self._opts), transport=transport)
        self.templates = AsyncTemplates(self)
        self.sweeps = AsyncSweeps(self)

    @property
    def url(self) -> str:
        return self._opts.config.url

    @property
    def config(self) -> Config:
        """The URL and token in use, and where the token came from."""
        return self._opts.config

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> httpx.Response:
        attempt = 0
        while True:
            try:
                r = await self._http.request(call.method, call.path, params=call.params, json=call.json,
                                             headers=call.headers)
            except httpx.TransportError as e:
                if attempt >= self._opts.retries or not _base.retryable(call, e):
                    raise _base.unreachable(self._opts, e) from e
                await asyncio.sleep(_base.delay(attempt, self._opts.backoff))
                attempt += 1
                continue
            if attempt < self._opts.retries and _base.retry_status(call, r):
                await asyncio.sleep(_base.delay(attempt, self._opts.backoff, r))
                attempt += 1
                continue
            if r.status_code >= 400 and r.status_code not in call.ok:
                raise _base.error(self._opts, r)
            return r

    async def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(await self._send(call))
        except StopIteration as done:
            return done.value

    async def _pages(self, page) -> AsyncIterator:
        cursor = None
        while True:
            items, cursor = await self._run(page(cursor))
            for item in items:
                yield item
            if not cursor:
                return

    async def submit(self, template: str, parameters: dict[str, Any] | None = None, overrides: Any = None, *,
                     backend: str | None = None, display_name: str | None = None,
                     labels: dict[str, str] | None = None, template_version: int | None = None,
                     idempotency_key: str | bool = True) -> Job:
        body = _ops.job_body(template, parameters, overrides, backend, display_name, labels, template_version)
        return await self._run(_ops.submit(body, idempotency_key))

    async def preview(self, template: str, parameters: dict[str, Any] | None = None, overrides: Any = None, *,
                      backend: str | None = None, display_name: str | None = None,
                      labels: dict[str, str] | None = None, template_version: int | None = None) -> JobPreview:
        body = _ops.job_body(template, parameters, overrides, backend, display_name, labels, template_version)
        return await self._run(_ops.preview(body))

    async def resolve(self, ref: str) -> str:
        """The id of the job whose id starts with `ref` (4 hex digits at least) or whose display
        name is `ref`. Raises NoMatch, or Ambiguous with the candidates (newest first)."""
        return await self._run(_ops.resolve("job", ref, _ops.job_page))

    async def get(self, job: JobRef) -> Job:
        return await self._run(_ops.get_job(job))

    def list(self, *, state: JobState | str | Iterable[JobState | str] | None = None, template: str | None = None,
             labels: dict[str, str | None] | Iterable[str] | None = None,
             created_after: datetime | str | None = None, created_before: datetime | str | None = None,
             id_prefix: str | None = None, name: str | None = None, page_size: int = 50) -> AsyncIterator[JobSummary]:
        filters = _ops.job_filters(state, template, labels, created_after, created_before, id_prefix, name)
        return self._pages(lambda cursor: _ops.job_page(filters, cursor, page_size))

    async def events(self, job: JobRef) -> list[JobEvent]:
        return await self._run(_ops.events(job))

    async def relaunch(self, job: JobRef, *, parameters: dict[str, Any] | None = None, overrides: Any = None,
                 backend: str | None = None, display_name: str | None = None, labels: dict[str, str] | None = None,
                 template_version: int | str | None = None, idempotency_key: str | bool = True) -> Job:
        """Launch `job` again (its template version, parameters, overrides, backend and labels),
        changed by what you pass: parameters and labels are merged, overrides is a merge patch
        over the job's own, template_version="latest" takes the template's newest version."""
        body = _ops.relaunch_body(parameters, overrides, backend, display_name, labels, template_version)
        return await self._run(_ops.relaunch(job, body, idempotency_key))

    async def cancel(self, job: JobRef) -> Job:
        return await self._run(_ops.cancel(job))

    async def wait(self, job: JobRef, timeout: float | None = None, *, interval: float = 0.5,
                   max_interval: float = 5.0, on_reconnect: Callable[[str], None] | None = None) -> Job:
        """Poll until the job ends; returns it in its final state. Raises WaitTimeout. Rides out
        a restart of the service for the client's reconnect_for seconds (on_reconnect: as logs())."""
        return await _wait(self.get, job, timeout, interval, max_interval,
                          _base.Reconnect(self._opts.reconnect_for, self._opts.backoff, on_reconnect))

    def logs(self, job: JobRef, *, follow: bool = False, replica: str | None = None, since: str | None = None,
             page_size: int = 1000, reconnect_for: float | None = None,
             on_reconnect: Callable[[str], None] | None = None) -> AsyncLogStream:
        return AsyncLogStream(self, job, follow, replica, since, page_size, reconnect_for, on_reconnect)

    async def export(self, job: JobRef, format: str = "gcloud") -> str:
        """The job's CustomJob as launched: format gcloud (a command), config (the YAML for
        `gcloud ai custom-jobs create --config`) or sdk (Vertex AI SDK Python)."""
        return await self._run(_ops.export_job(job, format))

    async def whoami(self) -> TokenInfo:
        return await self._run(_ops.whoami())

    async def team_limits(self, team: str) -> TeamLimits:
        return await self._run(_ops.team_limits(team))

    async def set_team_limits(self, team: str, *, max_concurrent_jobs: int | None = None,
                              max_accelerators: dict[str, int] | None = None,
                              max_monthly_spend: Decimal | str | None = None, on_exceed: str = "refuse") -> TeamLimits:
        return await self._run(_ops.set_team_limits(team, _ops.limits_body(max_concurrent_jobs, max_accelerators,
                                                                           max_monthly_spend, on_exceed)))

    async def team_usage(self, team: str) -> TeamUsage:
        return await self._run(_ops.team_usage(team))

    async def queue(self, backend: str | None = None, *, limit: int = 100, offset: int = 0) -> list[BackendQueue]:
        """Each enabled backend's queue (or one): capacity, use per team, waiting jobs in order."""
        return await self._run(_ops.queue(backend, limit, offset))


class AsyncLogStream:
    """`async for line in client.logs(job, follow=True)`; then `end` and `cursor`."""

    def __init__(self, client: AsyncClient, job: JobRef, follow: bool, replica: str | None, since: str | None,
                 page_size: int, reconnect_for: float | None = None,
                 on_reconnect: Callable[[str], None] | None = None):
        self._client, self._job, self._follow = client, job, follow
        self._reconnect_for, self._on_reconnect = reconnect_for, on_reconnect
        self._replica, self._page_size = replica, page_size
        self._state = _base.Follow(since)

    @property
    def end(self) -> LogEnd | None:
        return self._state.end

    @property
    def cursor(self) -> str | None:
        return self._state.cursor

    def __aiter__(self) -> AsyncIterator[LogLine]:
        return self._stream() if self._follow else self._pages()

    async def _pages(self) -> AsyncIterator[LogLine]:
        while True:
            page = await self._client._run(_ops.log_page(self._job, self._replica, self._state.cursor,
                                                         self._page_size))
            for line in page.lines:
                yield line
            self._state.cursor = page.cursor or self._state.cursor
            if len(page.lines) < self._page_size:
                return

    async def _stream(self) -> AsyncIterator[LogLine]:
        c, state = self._client, self._state
        again = _base.Reconnect(c._opts.reconnect_for if self._reconnect_for is None else self._reconnect_for,
                                c._opts.backoff, self._on_reconnect)
        while state.end is None:
            call = _ops.follow_call(self._job, self._replica, state.cursor)
            problem: str | None = None
            told: float | None = None  # the service's Retry-After: a stream it cannot serve now
            try:
                async with c._http.stream(call.method, call.path, params=call.params, headers=call.headers) as r:
                    if r.status_code >= 400:
                        await r.aread()
                        if r.status_code not in _base.FOLLOW_RETRY_STATUSES:
                            raise _base.error(c._opts, r)
                        problem = f"the service answered {r.status_code}"
                        told = _base.retry_after(r)
                    else:
                        received = False
                        async for text in r.aiter_lines():
                            if not received:
                                again.ok()  # bytes arrive (heartbeats too): the connection works
                                received = True
                            event = state.decoder.feed(text)
                            if event is None:
                                continue
                            line = state.handle(event)
                            if line is not None:
                                yield line
                            elif state.end is not None:
                                return
                        problem = None if received else "the stream closed before any event"
            except httpx.TransportError as e:
                if not _base.retryable(call, e):
                    raise _base.unreachable(c._opts, e) from e
                problem = f"connection lost ({_base.describe(e)})"
            # The stream broke off (or the service restarted) before the end: resume after
            # the last complete event (Last-Event-ID), for up to reconnect_for seconds.
            try:
                pause = again.next(problem, state.advised_delay(), told)
            except _base.GaveUp as e:
                raise _base.unreachable(c._opts, e) from None
            await asyncio.sleep(pause)
            state.reconnecting()


class AsyncTemplates:
    def __init__(self, client: AsyncClient):
        self._c = client

    def list(self, *, include_archived: bool = False, page_size: int = 100) -> AsyncIterator[TemplateSummary]:
        return self._c._pages(lambda cursor: _ops.template_page(include_archived, cursor, page_size))

    async def get(self, name: str, version: int | None = None) -> Template:
        return await self._c._run(_ops.get_template(name, version))

    async def versions(self, name: str) -> list[TemplateVersion]:
        return await self._c._run(_ops.template_versions(name))

    async def create(self, name: str, spec: dict, parameters: list[dict] | None = None,
                     description: str = "") -> Template:
        return await self._c._run(_ops.create_template(name, _ops.template_body(spec, parameters, description)))

    async def update(self, name: str, spec: dict, parameters: list[dict] | None = None,
                     description: str = "") -> Template:
        return await self._c._run(_ops.update_template(name, _ops.template_body(spec, parameters, description)))

    async def preview(self, name: str, spec: dict, parameters: list[dict] | None = None,
                      description: str = "") -> dict:
        return await self._c._run(_ops.preview_template(name, _ops.template_body(spec, parameters, description)))

    async def apply(self, name: str, spec: dict, parameters: list[dict] | None = None,
                    description: str = "") -> Applied:
        return await self._c._run(_ops.apply_template(name, _ops.template_body(spec, parameters, description)))

    async def archive(self, name: str) -> Template:
        return await self._c._run(_ops.set_archived(name, True))

    async def unarchive(self, name: str) -> Template:
        return await self._c._run(_ops.set_archived(name, False))

    async def import_source(self, source: str | list[str], format: str = "aiplatform-config", *,
                      name: str | None = None, description: str | None = None,
                      dry_run: bool = False) -> ImportedTemplate:
        """Turn an AI Platform config or a Vertex --config file (YAML text: formats aiplatform-config,
        vertex-config), a `gcloud ai custom-jobs create` command or a list of
        --worker-pool-spec values (format worker-pool-specs) into a template spec; stored when `name` is
        given (admin). `warnings` says what was mapped or left out."""
        return await self._c._run(_ops.import_template(source, format, name, description, dry_run))

    async def export(self, name: str, format: str = "gcloud", *, version: int | None = None,
                 parameters: dict[str, Any] | None = None) -> str:
        """The template's CustomJob, compiled with `parameters` (default: the defaults), for gcloud or the SDK."""
        return await self._c._run(_ops.export_template(name, format, version, parameters))


async def _wait(get, ref, timeout: float | None, interval: float, max_interval: float, again: _base.Reconnect):
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            current = await get(ref)
        except (ConnectionFailed, ServiceUnavailable) as e:
            # get() has retried a few times: the service is restarting, or away for longer.
            try:
                pause = again.next(f"service unreachable ({_base.describe(e)})")
            except _base.GaveUp:
                raise e from None
            if deadline is not None and time.monotonic() + pause >= deadline:
                raise
            await asyncio.sleep(pause)
            continue
        again.ok()
        if current.final:
            return current
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(current, timeout)
        left = max_interval if deadline is None else max(0.0, deadline - time.monotonic())
        await asyncio.sleep(min(interval, left))
        interval = min(interval * 1.5, max_interval)


class AsyncSweeps:
    """client.sweeps, awaited (see Client.sweeps)."""

    def __init__(self, client: AsyncClient):
        self._c = client

    async def create(self, body: dict, *, dry_run: bool = False) -> Sweep:
        return await self._c._run(_ops.create_sweep(body, dry_run))

    async def resolve(self, ref: str) -> str:
        """The id of the sweep whose id starts with `ref` or whose display name is `ref` (as Client.resolve)."""
        return await self._c._run(_ops.resolve("sweep", ref, _ops.sweep_page))

    async def get(self, sweep: SweepRef) -> Sweep:
        return await self._c._run(_ops.get_sweep(sweep))

    def list(self, *, state: str | Iterable[str] | None = None, id_prefix: str | None = None,
             name: str | None = None, page_size: int = 20) -> AsyncIterator[SweepSummary]:
        states = [state] if isinstance(state, str) else list(state or [])
        filters = _ops.sweep_filters(states, id_prefix, name)
        return self._c._pages(lambda cursor: _ops.sweep_page(filters, cursor, page_size))

    async def cancel(self, sweep: SweepRef) -> Sweep:
        return await self._c._run(_ops.cancel_sweep(sweep))

    async def resume(self, sweep: SweepRef) -> Sweep:
        return await self._c._run(_ops.resume_sweep(sweep))

    async def wait(self, sweep: SweepRef, timeout: float | None = None, *, interval: float = 0.5,
                   max_interval: float = 5.0) -> Sweep:
        return await _wait(self.get, sweep, timeout, interval, max_interval,
                            _base.Reconnect(self._c._opts.reconnect_for, self._c._opts.backoff, None))
