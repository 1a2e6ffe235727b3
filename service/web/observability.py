"""Request ids, Prometheus metrics and structured JSON logs.

Pure ASGI middleware (not BaseHTTPMiddleware): it sits on every request's hot
path and must not buffer streaming responses such as the SSE log follow."""
from __future__ import annotations

import hmac
import logging
import re
import time
import uuid
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

from service.core.logging_setup import request_id_var
from service.web.body_limits import CLIENT_GONE

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class Metrics:
    """One registry per app, so tests can build many apps in one process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        buckets = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)
        # Anyone may scrape these: no route label (which team submits how often, who makes
        # tokens and webhooks is for the operator: the by-route series are private, below).
        self.requests = Counter("trainjobs_http_requests_total", "HTTP requests",
                                ["method", "status"], registry=self.registry)
        self.latency = Histogram("trainjobs_http_request_duration_seconds", "HTTP request latency",
                                 ["method"], registry=self.registry, buckets=buckets)
        self.overload_refusals = Counter("trainjobs_overload_refusals_total", "Requests answered 503 because "
                                         "every slot (requests) or stream of the process was busy",
                                         ["kind"], registry=self.registry)
        self.in_flight = Gauge("trainjobs_requests_in_flight", "Requests running in this process (streams aside)",
                               registry=self.registry)
        self.streams = Gauge("trainjobs_streams_open", "Log streams (SSE) open in this process",
                             registry=self.registry)
        self.reconcile_ticks = Counter("trainjobs_reconcile_ticks_total", "Reconciler passes", registry=self.registry)
        self.reconcile_errors = Counter("trainjobs_reconcile_errors_total", "Reconciler errors (backend calls, "
                                        "database)", registry=self.registry)
        self.reconcile_seconds = Histogram("trainjobs_reconcile_duration_seconds", "Reconciler pass duration",
                                           registry=self.registry,
                                           buckets=(.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        # Set by the app: () -> {(backend, state): count}
        self.jobs_by_state_source: Callable[[], dict[tuple[str, str], int]] | None = None
        # Job counts say what every team is doing: only a scrape with the metrics token sees them.
        self.private_registry = CollectorRegistry()
        self.private_registry.register(_JobsByState(self))
        self.route_requests = Counter("trainjobs_http_route_requests_total", "HTTP requests by route",
                                      ["method", "route", "status"], registry=self.private_registry)
        self.route_latency = Histogram("trainjobs_http_route_request_duration_seconds", "HTTP request latency "
                                       "by route", ["method", "route"], registry=self.private_registry,
                                       buckets=buckets)

    def watch_bodies(self, budget) -> None:
        Gauge("trainjobs_request_bodies_reading", "Request bodies being received (before a request slot)",
              registry=self.registry).set_function(lambda: budget.reading)
        Gauge("trainjobs_request_body_bytes", "Bytes of request bodies held (TRAINJOBS_HTTP_BODY_BUFFER_BYTES)",
              registry=self.registry).set_function(lambda: budget.held)

    def watch_admission(self, admission) -> None:
        self.in_flight.set_function(lambda: admission.in_flight)
        self.streams.set_function(lambda: admission.streaming)

    def exposition(self, private: bool) -> bytes:
        out = generate_latest(self.registry)
        return out + generate_latest(self.private_registry) if private else out


class _JobsByState:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        family = GaugeMetricFamily("trainjobs_jobs", "Jobs by backend and state", labels=["backend", "state"])
        source = self.metrics.jobs_by_state_source
        if source is not None:
            try:
                for (backend, state), n in source().items():
                    family.add_metric([backend, state], n)
            except Exception:  # the database may be down; the scrape still answers
                logging.getLogger("trainjobs.metrics").warning("jobs-by-state query failed")
        yield family


class RequestContextMiddleware:
    """Gives each request an id (X-Request-ID, echoed back), times it, counts it."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self.log = logging.getLogger("trainjobs.access")
        # The labelled series of each (method, route, status), looked up once: labels() costs
        # more than the count itself. Bounded as the labels are: methods, route templates
        # (or "unmatched") and status codes.
        self._children: dict[tuple[str, str, int], tuple] = {}

    def _labelled(self, method: str, path: str, status: int) -> tuple:
        m = self.metrics
        children = (m.requests.labels(method, str(status)), m.latency.labels(method),
                    m.route_requests.labels(method, path, str(status)), m.route_latency.labels(method, path))
        self._children[(method, path, status)] = children
        return children

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        incoming = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), "")
        rid = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(rid)
        status = 500
        started = False
        t0 = time.perf_counter()

        async def send_with_id(message):
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [(b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - t0
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            if scope.get(CLIENT_GONE) and not started:
                status = 499  # the client went away mid-body (nginx's code): this line is all it leaves
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"  # bounded label values
            children = self._children.get((method, path, status))
            if children is None:
                children = self._labelled(method, path, status)
            requests, latency, route_requests, route_latency = children
            requests.inc()
            latency.observe(elapsed)
            route_requests.inc()
            route_latency.observe(elapsed)
            self.log.info("request" if status != 499 else "request: the client disconnected mid-body",
                          extra={"method": method, "route": path, "status": status,
                                 "duration_ms": round(elapsed * 1000, 2)})
            request_id_var.reset(token)


def metrics_access(expected: str, authorization: str | None) -> bool:
    """True if this scrape may see job counts: it carries `expected`, TRAINJOBS_METRICS_TOKEN
    (empty: none set). Any other scrape (no token, a team's token) gets the process metrics only."""
    scheme, _, token = (authorization or "").partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(),
                                                                                 expected.encode())
