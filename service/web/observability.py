"""Request ids, Prometheus metrics and structured JSON logs.

Pure ASGI middleware (not BaseHTTPMiddleware): it sits on every request's hot
path and must not buffer streaming responses such as the SSE log follow."""
from __future__ import annotations

import contextvars
import hmac
import json
import logging
import re
import sys
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

from service.web.body_limits import CLIENT_GONE

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
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


class JsonFormatter(logging.Formatter):
    # color_message: uvicorn's copy of its message with ANSI colours, noise in a log line.
    _STD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
               "level": record.levelname, "logger": record.name, "msg": record.getMessage(),
               "request_id": request_id_var.get()}
        for key, value in record.__dict__.items():
            if key not in self._STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            # The trace goes to the server's log only, never into a response.
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """One line a record for a person at a terminal: time, level, logger, message, then the
    record's fields as key=value (an access line: method, route, status, duration_ms)."""

    _STD = JsonFormatter._STD

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in record.__dict__.items() if k not in self._STD and not k.startswith("_")}
        rid = request_id_var.get()
        if rid != "-":
            fields["request_id"] = rid
        line = (f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
                + "".join(f" {k}={v}" for k, v in fields.items()))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


LOG_FORMATS = ("auto", "json", "text")


def resolved_log_format(fmt: str = "auto", stream=None) -> str:
    """auto: text on a terminal (a person reads it), JSON otherwise (a collector parses it)."""
    if fmt != "auto":
        return fmt
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    handler = logging.StreamHandler()
    if resolved_log_format(fmt, handler.stream) == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic says a line per migration and two about its context on every start: noise at
    # INFO (the first start printed ~20 of them before the token banner); shown at DEBUG.
    logging.getLogger("alembic").setLevel(logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING)


def metrics_access(expected: str, authorization: str | None) -> bool:
    """True if this scrape may see job counts: it carries `expected`, TRAINJOBS_METRICS_TOKEN
    (empty: none set). Any other scrape (no token, a team's token) gets the process metrics only."""
    scheme, _, token = (authorization or "").partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(),
                                                                                 expected.encode())
