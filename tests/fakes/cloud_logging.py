"""A fake of Cloud Logging's `entries:list` (v2 REST), on 127.0.0.1.

`google.cloud.logging.Client(_use_grpc=False, client_options={"api_endpoint": url})`
posts `{resourceNames, filter, orderBy, pageSize, pageToken}` to /v2/entries:list;
the body is parsed with logging_v2's ListLogEntriesRequest refusing unknown fields.
Entries come back ordered by timestamp, then insertId, as Google documents.

    fake.add(job_numeric_id, "workerpool0-0", "epoch 1 loss=0.3", severity="INFO")
    fake.add(job_numeric_id, "workerpool0-0", {"event": "epoch_end", ...})   # a JSON line: jsonPayload
    fake.filters                       # every filter received (to check the timestamp bound)
    FakeCloudLogging(quota_per_minute=60)   # Google's read quota: 429 RESOURCE_EXHAUSTED beyond it
"""
from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections import Counter, deque

from google.cloud.logging_v2.types import ListLogEntriesRequest
from google.protobuf import json_format

from tests.fakes import filters
from tests.fakes.clock import FakeClock
from tests.fakes.server import FakeServer, GoogleError, Request

SEVERITIES = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]


class FakeCloudLogging:
    def __init__(self, project: str = "test-project", *, max_page_size: int = 1000,
                 quota_per_minute: int | None = None):
        self.project = project
        self.max_page_size = max_page_size
        self.quota_per_minute = quota_per_minute
        self.clock = FakeClock()
        self.refused = 0                  # calls answered 429 by the emulated quota
        self._minute: deque[int] = deque()  # clock times (ns) of the calls of the last minute
        self.entries: list[dict] = []
        self.calls: Counter[str] = Counter()
        self.filters: list[str] = []
        self._faults: list[tuple[int, str]] = []
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._server = FakeServer(self._handle)
        self.url = self._server.url

    def start(self) -> FakeCloudLogging:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeCloudLogging:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def fail(self, status: int, message: str = "The service is currently unavailable.", times: int = 1) -> None:
        with self._lock:
            self._faults.extend([(status, message)] * times)

    def add(self, job_id: str, task_name: str | None, message: str | dict, *, severity: str = "INFO",
            timestamp_ns: int | None = None, insert_id: str | None = None) -> dict:
        """One entry as Vertex AI writes it for a CustomJob replica (resource type ml_job)."""
        ts = timestamp_ns if timestamp_ns is not None else time.time_ns()
        labels = {"job_id": job_id, "project_id": self.project}
        if task_name is not None:
            labels["task_name"] = task_name
        entry = {"logName": f"projects/{self.project}/logs/"
                            f"{'workerpool0-0' if task_name is None else task_name}",
                 "resource": {"type": "ml_job", "labels": labels},
                 "timestamp": filters.ns_to_rfc3339(ts), "receiveTimestamp": filters.ns_to_rfc3339(ts),
                 "severity": severity, "insertId": insert_id or f"{next(self._ids):012d}",
                 "labels": {"ml.googleapis.com/job_id/log_area": "user"}}
        if isinstance(message, dict):
            entry["jsonPayload"] = message
        else:
            entry["textPayload"] = message
        with self._lock:
            self.entries.append(entry)
        return entry

    def _handle(self, req: Request) -> tuple[int, dict]:
        if req.path != "/v2/entries:list" or req.method != "POST":
            raise GoogleError(404, f"no route for {req.method} {req.path}")
        with self._lock:
            self.calls["list"] += 1
            if self._faults:
                status, message = self._faults.pop(0)
                raise GoogleError(status, message)
            self._charge()
            return self._list(req)

    def _charge(self) -> None:
        """Google's entries.list quota per minute (shared by everyone in the project): past
        it, 429 RESOURCE_EXHAUSTED, with no Retry-After (VERTEX.md)."""
        if self.quota_per_minute is None:
            return
        now = self.clock.now_ns()
        while self._minute and now - self._minute[0] >= 60_000_000_000:
            self._minute.popleft()
        if len(self._minute) >= self.quota_per_minute:
            self.refused += 1
            metric = "logging.googleapis.com/read_requests"
            raise GoogleError(429, f"Quota exceeded for quota metric 'Read requests' and limit 'Read requests per "
                                   f"minute' of service 'logging.googleapis.com' for consumer "
                                   f"'project_number:{self.project}'.",
                              details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                        "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
                                        "metadata": {"service": "logging.googleapis.com", "quota_metric": metric,
                                                     "quota_limit": "ReadRequestsPerMinutePerProject"}}])
        self._minute.append(now)

    def _list(self, req: Request) -> tuple[int, dict]:
        try:
            ListLogEntriesRequest.from_json(req.body.decode() or "{}", ignore_unknown_fields=False)
        except (json_format.ParseError, ValueError) as e:
            raise GoogleError(400, f"Invalid JSON payload received. {e}") from None
        body = req.json()
        if body.get("resourceNames") != [f"projects/{self.project}"]:
            raise GoogleError(403, f"The caller does not have permission for {body.get('resourceNames')}")
        text = body.get("filter", "")
        self.filters.append(text)
        try:
            tree = filters.parse(text)
            for r in filters.restrictions(tree):
                self._check(r)
        except filters.FilterError as e:
            raise GoogleError(400, f"Unparseable filter: {e}") from None
        order = body.get("orderBy", "timestamp asc")
        if order not in ("timestamp asc", "timestamp desc"):
            raise GoogleError(400, f"Invalid orderBy {order!r}")
        size = min(int(body.get("pageSize") or 50), self.max_page_size)
        start = 0
        if body.get("pageToken"):
            tok = json.loads(base64.urlsafe_b64decode(body["pageToken"]))
            if tok["f"] != text:
                raise GoogleError(400, "page token does not match the filter")
            start = tok["o"]
        matched = [e for e in self.entries if filters.evaluate(tree, _compare, e)]
        matched.sort(key=lambda e: (filters.timestamp_ns(e["timestamp"]), e["insertId"]),
                     reverse=order.endswith("desc"))
        page = matched[start:start + size]
        out: dict = {"entries": page} if page else {}
        if start + size < len(matched):
            out["nextPageToken"] = base64.urlsafe_b64encode(
                json.dumps({"o": start + size, "f": text}).encode()).decode()
        return 200, out

    @staticmethod
    def _check(r: filters.Restriction) -> None:
        if r.field == "timestamp":
            filters.timestamp_ns(r.value)
        elif r.field == "severity":
            if r.value not in SEVERITIES:
                raise filters.FilterError(f"unknown severity {r.value}")
        elif not (r.field in ("resource.type", "logName", "insertId", "textPayload")
                  or r.field.startswith(("resource.labels.", "labels.", "jsonPayload."))):
            raise filters.FilterError(f"unsupported field {r.field!r}")


def _compare(entry: dict, r: filters.Restriction) -> bool:
    if r.field == "timestamp":
        return filters.compare_values(filters.timestamp_ns(entry["timestamp"]), r.op,
                                      filters.timestamp_ns(r.value))
    if r.field == "severity":
        return filters.compare_values(SEVERITIES.index(entry.get("severity", "DEFAULT")), r.op,
                                      SEVERITIES.index(r.value))
    value: object = entry
    for part in _path(r.field):
        value = value.get(part) if isinstance(value, dict) else None
    if r.op == ":":
        return value is not None and (r.value == "*" or r.value in str(value))
    return filters.compare_values(value, r.op, r.value) if value is not None or r.op == "!=" else False


def _path(field: str) -> list[str]:
    # labels keys may contain dots and slashes: "labels.ml.googleapis.com/job_id/log_area"
    for prefix in ("resource.labels.", "labels."):
        if field.startswith(prefix):
            return prefix.rstrip(".").split(".") + [field[len(prefix):]]
    return field.split(".")
