"""A fake of the Vertex AI JobService REST API (customJobs), on 127.0.0.1.

It speaks the v1 wire format that `aiplatform_v1.JobServiceClient(transport="rest")`
uses (see shared/VERTEX.md) and is strict where Google is: every body is parsed
with the aiplatform_v1 types refusing unknown fields, so a malformed CustomJob is
a 400 INVALID_ARGUMENT in Google's error shape and the test fails.

Implements create, get, list (filter, pageSize, pageToken, readMask), cancel and
delete (+ the Operation at /ui/...). Tests drive it:

    fake.fail("create", 429, times=1)          # 429 in Google's generic wording, then success
    fake.fail_rate_limit("create")             # 429 with ErrorInfo RATE_LIMIT_EXCEEDED
    fake.fail_quota("create")                  # 429 with ErrorInfo RESOURCE_QUOTA_EXCEEDED (GPUs)
    fake.fail("create", 503, apply=True)       # create the job, then lose the answer
    fake.slow_create(30)                       # the next create lands (becomes visible, and is
    fake.wait_for_pending(1); fake.clock.advance(30)   # answered) 30 s of fake time after it arrived
    fake.set_state(job, "JOB_STATE_FAILED", error=(3, "bad flag"))
    fake.script(job_id, ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]); fake.advance()
    fake.calls["list"], fake.total_calls       # what the service cost
"""
from __future__ import annotations

import base64
import fnmatch
import itertools
import json
import re
import threading
import unicodedata
from collections import Counter, deque
from dataclasses import dataclass, field

from google.cloud import aiplatform_v1 as v1
from google.protobuf import json_format

from tests.fakes import filters
from tests.fakes.clock import FakeClock
from tests.fakes.server import FakeServer, GoogleError, Request

JOB_ID_LABEL = "trainjobs_job_id"
LEGACY_JOB_ID_LABEL = "trainjobs-job-id"
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
            "JOB_STATE_PARTIALLY_SUCCEEDED"}
STATE_NAMES = {s.name for s in v1.JobState}
_FIELDS = {f.json_name for f in v1.CustomJob.pb().DESCRIPTOR.fields}
_OUTPUT_ONLY = ("name", "state", "createTime", "startTime", "endTime", "updateTime", "error", "webAccessUris")

_PARENT = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/customJobs$")
_JOB = re.compile(r"^/v1/(projects/([^/]+)/locations/([^/]+)/customJobs/([^/:]+))(:cancel)?$")
_OPERATION = re.compile(r"^/(?:ui|v1)/(projects/[^/]+/locations/[^/]+/customJobs/[^/]+/operations/[^/:]+)$")


def _label_char(ch: str) -> bool:
    return ch in "_-" or unicodedata.category(ch) in ("Ll", "Lo", "Nd", "Nl", "No")


def label_ok(key: str, value: str) -> bool:
    """CustomJob.labels as Google documents them: up to 64 codepoints each, lowercase
    letters (international too), digits, _ and -; keys start with a letter."""
    return (0 < len(key) <= 64 and unicodedata.category(key[0]) in ("Ll", "Lo") and all(map(_label_char, key))
            and len(value) <= 64 and all(map(_label_char, value)))


def _job_id(data: dict) -> str | None:
    labels = data.get("labels", {})
    return labels.get(JOB_ID_LABEL) or labels.get(LEGACY_JOB_ID_LABEL)


@dataclass
class Fault:
    status: int
    message: str
    status_name: str | None = None
    details: list = field(default_factory=list)
    apply: bool = False   # do the work, then answer with the error (a lost reply)


@dataclass
class _Job:
    data: dict                # the CustomJob as JSON, enums by name
    create_ns: int
    version: int = 0
    _cache: dict = field(default_factory=dict)

    def render(self, int_enums: bool) -> dict:
        key = (self.version, int_enums)
        if key not in self._cache:
            self._cache.clear()
            if int_enums:
                msg = v1.CustomJob.from_json(json.dumps(self.data))
                self._cache[key] = json.loads(v1.CustomJob.to_json(
                    msg, use_integers_for_enums=True, always_print_fields_with_no_presence=False))
            else:
                self._cache[key] = self.data
        return self._cache[key]


class FakeJobService:
    def __init__(self, project: str = "test-project", location: str = "us-central1", *,
                 max_page_size: int = 1000, default_page_size: int = 100):
        self.project = project
        self.location = location
        self.max_page_size = max_page_size
        self.default_page_size = default_page_size
        self.jobs: dict[str, _Job] = {}
        self.operations: dict[str, dict] = {}
        self.calls: Counter[str] = Counter()
        self.requests: deque[tuple[str, dict]] = deque(maxlen=5000)
        self.alt_params: set[str] = set()
        self.cancel_immediately = False
        self.clock = FakeClock()
        self.headers: dict[str, dict[str, str]] = {}   # method -> the last request's headers
        self.pending_creates = 0                       # slow creates accepted, not yet landed
        self._slow: deque[float] = deque()
        self._stopping = threading.Event()
        self._faults: dict[str, deque[Fault]] = {}
        self._scripts: dict[str, deque[tuple[str, tuple[int, str] | None]]] = {}
        self._ids = itertools.count(7_000_000_000_000_000_001)
        self._op_ids = itertools.count(1)
        self._lock = threading.RLock()
        self._pending = threading.Condition(self._lock)
        self._server = FakeServer(self._handle)
        self.url = self._server.url
        from tests.fakes.vertex_models import FakeModels
        self.models = FakeModels(self)   # the ModelService, on the same endpoint as Google serves it

    # lifecycle -------------------------------------------------------------
    def start(self) -> FakeJobService:
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.clock.wake()
        self._server.stop()

    def __enter__(self) -> FakeJobService:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # what tests script ---------------------------------------------------------
    def fail(self, method: str, status: int, message: str | None = None, *, times: int = 1,
             status_name: str | None = None, details: list | None = None, apply: bool = False) -> None:
        """The next `times` calls of `method` (create|get|list|cancel|delete) answer `status`."""
        msg = message or {429: "Resource has been exhausted (e.g. check quota).",
                          500: "Internal error encountered.", 503: "The service is currently unavailable.",
                          403: f"Permission 'aiplatform.customJobs.create' denied on resource "
                               f"'//aiplatform.googleapis.com/projects/{self.project}/locations/{self.location}' "
                               f"(or it may not exist)."}.get(status, "error")
        with self._lock:
            q = self._faults.setdefault(method, deque())
            q.extend(Fault(status, msg, status_name, list(details or []), apply) for _ in range(times))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def fail_quota(self, method: str = "create", metric: str = "custom_model_training_nvidia_t4_gpus", *,
                   reason: str | None = "RESOURCE_QUOTA_EXCEEDED") -> None:
        """A resource quota (not a request rate) is exhausted: Google answers 429 too, with the
        google.rpc.ErrorInfo of google.api.ErrorReason and a QuotaFailure naming the metric.
        reason=None: only the QuotaFailure names the metric."""
        full = f"aiplatform.googleapis.com/{metric}"
        details: list = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                          "violations": [{"subject": f"projects/{self.project}", "description": f"{full} exhausted",
                                          "apiService": "aiplatform.googleapis.com", "quotaMetric": full}]}]
        if reason:
            details.insert(0, {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                               "domain": "googleapis.com",
                               "metadata": {"service": "aiplatform.googleapis.com",
                                            "consumer": f"projects/{self.project}", "quota_metric": full,
                                            "quota_limit": f"{metric}_per_region",
                                            "quota_location": self.location}})
        self.fail(method, 429, f"The following quota metrics exceed quota limits: {full}", details=details)

    def fail_rate_limit(self, method: str = "create", *, times: int = 1) -> None:
        """A request-rate quota: 429 with ErrorInfo RATE_LIMIT_EXCEEDED (no Retry-After header)."""
        metric = "aiplatform.googleapis.com/job_service_requests" if method != "create" else \
            "aiplatform.googleapis.com/custom_job_create_requests"
        self.fail(method, 429, f"Quota exceeded for quota metric '{metric}' and limit 'per minute per region' "
                               f"of service 'aiplatform.googleapis.com' for consumer 'projects/{self.project}'.",
                  times=times, details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                         "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
                                         "metadata": {"service": "aiplatform.googleapis.com",
                                                      "consumer": f"projects/{self.project}",
                                                      "quota_metric": metric, "quota_location": self.location}}])

    def slow_create(self, seconds: float, *, times: int = 1) -> None:
        """The next `times` creates are accepted at once but land `seconds` of fake time later:
        only then is the CustomJob visible (get, list) and the answer sent, if the client still
        waits for it. Tests move the clock on with `clock.advance()`."""
        with self._lock:
            self._slow.extend([seconds] * times)

    def wait_for_pending(self, count: int = 1, timeout: float = 30.0) -> None:
        """Until `count` slow creates have arrived and not landed (a signal, not a sleep)."""
        with self._pending:
            if not self._pending.wait_for(lambda: self.pending_creates >= count, timeout):
                raise AssertionError(f"{self.pending_creates} slow creates arrived, expected {count}")

    def wait_for_landed(self, timeout: float = 30.0) -> None:
        """Until every slow create has landed (after the test moved the clock past it)."""
        with self._pending:
            if not self._pending.wait_for(lambda: self.pending_creates == 0, timeout):
                raise AssertionError(f"{self.pending_creates} slow creates have not landed")

    def set_state(self, job: str, state: str, *, error: tuple[int, str] | None = None) -> None:
        """Move a job (its name, numeric id or trainjobs job id) to `state`; error = (rpc code, message)."""
        if state not in STATE_NAMES:
            raise ValueError(f"unknown state {state}")
        with self._lock:
            j = self._lookup(job)
            now = self._now_ns()
            d = j.data
            d["state"] = state
            d["updateTime"] = filters.ns_to_rfc3339(now)
            if state == "JOB_STATE_RUNNING" and "startTime" not in d:
                d["startTime"] = d["updateTime"]
            if state in TERMINAL:
                d.setdefault("endTime", d["updateTime"])
            if error is not None:
                d["error"] = {"code": error[0], "message": error[1]}
            j.version += 1

    def script(self, job: str, steps: list) -> None:
        """Steps for `advance()`: "JOB_STATE_X" or ("JOB_STATE_X", (code, message))."""
        with self._lock:
            name = self._lookup(job).data["name"]
            self._scripts[name] = deque(s if isinstance(s, tuple) else (s, None) for s in steps)

    def advance(self) -> int:
        """Apply the next scripted step of every scripted job; returns how many moved."""
        moved = 0
        with self._lock:
            for name, steps in list(self._scripts.items()):
                if steps:
                    state, error = steps.popleft()
                    self.set_state(name, state, error=error)
                    moved += 1
        return moved

    def complete_cancels(self) -> int:
        """Vertex finishes what `cancel` started: CANCELLING -> CANCELLED, error code 1."""
        with self._lock:
            names = [n for n, j in self.jobs.items() if j.data.get("state") == "JOB_STATE_CANCELLING"]
            for n in names:
                self.set_state(n, "JOB_STATE_CANCELLED", error=(1, "CANCELED"))
            return len(names)

    def seed(self, count: int, *, state: str = "JOB_STATE_RUNNING", job_ids: list[str] | None = None,
             created_ns: int | None = None) -> list[str]:
        """Put `count` jobs straight into the store (benchmarks); returns their names."""
        names = []
        with self._lock:
            for i in range(count):
                jid = job_ids[i] if job_ids else f"seed-{i}"
                body = {"displayName": f"seed-{i}", "labels": {JOB_ID_LABEL: jid},
                        "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                         "replicaCount": "1",
                                                         "containerSpec": {"imageUri": "gcr.io/p/t:1"}}]}}
                names.append(self._store(body, state, created_ns)["name"])
        return names

    def _now_ns(self) -> int:
        return self.clock.now_ns() // 1000 * 1000  # Google answers with microseconds

    # what tests read ---------------------------------------------------------------
    def find(self, job_id: str) -> list[dict]:
        """The CustomJobs labelled with this trainjobs job id (by the label key of now or of before)."""
        with self._lock:
            return [j.data for j in self.jobs.values() if _job_id(j.data) == job_id]

    def get(self, job: str) -> dict:
        with self._lock:
            return self._lookup(job).data

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def reset_calls(self) -> None:
        with self._lock:
            self.calls.clear()
            self.requests.clear()

    def list_filters(self) -> list[str]:
        return [q.get("filter", "") for m, q in self.requests if m == "list"]

    # HTTP ------------------------------------------------------------------
    def _handle(self, req: Request) -> tuple[int, dict]:
        int_enums = "enum-encoding=int" in req.query.get("$alt", "")
        with self._lock:
            if "$alt" in req.query:
                self.alt_params.add(req.query["$alt"])
        if self.models.handles(req.path):
            return self.models.handle(req)
        if m := _OPERATION.match(req.path):
            if req.method != "GET":
                raise GoogleError(405, "method not allowed")
            return self._count("operation", req, lambda: self._get_operation(m.group(1)))
        if m := _PARENT.match(req.path):
            self._check_parent(m.group(1), m.group(2))
            if req.method == "POST":
                with self._lock:
                    delay = self._slow.popleft() if self._slow else None
                if delay is not None:
                    return self._slow_create(req, int_enums, delay)
                return self._count("create", req, lambda: self._create(req, int_enums))
            if req.method == "GET":
                return self._count("list", req, lambda: self._list(req, int_enums))
        elif m := _JOB.match(req.path):
            self._check_parent(m.group(2), m.group(3))
            name, cancel = m.group(1), m.group(5)
            if cancel and req.method == "POST":
                return self._count("cancel", req, lambda: self._cancel(name, req))
            if not cancel and req.method == "GET":
                return self._count("get", req, lambda: (200, self._lookup_name(name).render(int_enums)))
            if not cancel and req.method == "DELETE":
                return self._count("delete", req, lambda: self._delete(name))
        raise GoogleError(404, f"no route for {req.method} {req.path}")

    def _slow_create(self, req: Request, int_enums: bool, delay: float) -> tuple[int, dict]:
        with self._lock:
            self.calls["create"] += 1
            self.requests.append(("create", dict(req.query)))
            self.headers["create"] = dict(req.headers)
            data = self._accepted(req)
            self.pending_creates += 1
            self._pending.notify_all()
        landed = self.clock.wait_until(self.clock.now_ns() + int(delay * 1e9), stop=self._stopping)
        with self._lock:
            job = self._store(data, "JOB_STATE_PENDING", None) if landed else None
            self.pending_creates -= 1
            self._pending.notify_all()
        if job is None:
            raise GoogleError(503, "The service is currently unavailable.")
        return 200, self.jobs[job["name"]].render(int_enums)

    def _count(self, method: str, req: Request, work):
        with self._lock:
            self.calls[method] += 1
            self.requests.append((method, dict(req.query)))
            self.headers[method] = dict(req.headers)
            q = self._faults.get(method)
            fault = q.popleft() if q else None
            if fault is None:
                return work()
            if fault.apply:
                work()
            raise GoogleError(fault.status, fault.message, fault.status_name, fault.details)

    def _check_parent(self, project: str, location: str) -> None:
        if project != self.project or location != self.location:
            raise GoogleError(403, f"Permission denied on resource project {project} "
                                   f"(or location {location}).")

    def _create(self, req: Request, int_enums: bool) -> tuple[int, dict]:
        job = self._store(self._accepted(req), "JOB_STATE_PENDING", None)
        return 200, self.jobs[job["name"]].render(int_enums)

    def _accepted(self, req: Request) -> dict:
        """The CustomJob of a create request, as stored: checked as strictly as Google does."""
        try:
            msg = v1.CustomJob.from_json(req.body.decode() or "{}", ignore_unknown_fields=False)
        except (json_format.ParseError, ValueError) as e:
            raise GoogleError(400, f"Invalid JSON payload received. {e}") from None
        body = json.loads(req.body)
        problems = self._validate(body, msg)
        if problems:
            raise GoogleError(400, "; ".join(problems))
        # Store the canonical form (enums by name) of what was sent.
        return json.loads(v1.CustomJob.to_json(msg, use_integers_for_enums=False,
                                               always_print_fields_with_no_presence=False))

    def _validate(self, body: dict, msg: v1.CustomJob) -> list[str]:
        problems = [f"{f} is output only and must not be set" for f in _OUTPUT_ONLY if f in body]
        if not msg.display_name:
            problems.append("CustomJob.display_name is required")
        elif len(msg.display_name) > 128:
            problems.append("CustomJob.display_name must be at most 128 characters")
        pools = list(msg.job_spec.worker_pool_specs)
        if not pools:
            problems.append("CustomJob.job_spec.worker_pool_specs is required")
        elif pools[0].replica_count != 1:
            problems.append("The replica count of the first worker pool (the primary replica) must be 1")
        for i, p in enumerate(pools):
            empty = v1.WorkerPoolSpec.pb(p).ByteSize() == 0
            if not empty and not (p.container_spec.image_uri or p.python_package_spec.executor_image_uri):
                problems.append(f"worker_pool_specs[{i}] needs a container_spec.image_uri or python_package_spec")
            if not empty and not p.machine_spec.machine_type:
                problems.append(f"worker_pool_specs[{i}].machine_spec.machine_type is required")
        for k, v in msg.labels.items():
            if not label_ok(k, v):
                problems.append(f"invalid label {k}={v}")
        if len(msg.labels) > 64:
            problems.append("at most 64 labels")
        return problems

    def _store(self, data: dict, state: str, created_ns: int | None) -> dict:
        jid = next(self._ids)
        name = f"projects/{self.project}/locations/{self.location}/customJobs/{jid}"
        now = created_ns or self._now_ns()
        data = dict(data, name=name, state=state, createTime=filters.ns_to_rfc3339(now),
                    updateTime=filters.ns_to_rfc3339(now))
        if state == "JOB_STATE_RUNNING":
            data["startTime"] = data["createTime"]
        self.jobs[name] = _Job(data, now)
        return data

    def _lookup_name(self, name: str) -> _Job:
        job = self.jobs.get(name)
        if job is None:
            raise GoogleError(404, f"The CustomJob {name} does not exist.")
        return job

    def _lookup(self, key: str) -> _Job:
        if key in self.jobs:
            return self.jobs[key]
        for j in self.jobs.values():
            if j.data["name"].rsplit("/", 1)[1] == key or _job_id(j.data) == key:
                return j
        raise KeyError(key)

    def _list(self, req: Request, int_enums: bool) -> tuple[int, dict]:
        q = req.query
        text = q.get("filter", "")
        try:
            tree = filters.parse(text)
            for r in filters.restrictions(tree):
                self._check_restriction(r)
        except filters.FilterError as e:
            raise GoogleError(400, f"Invalid filter {text!r}: {e}") from None
        try:
            size = int(q.get("pageSize") or 0) or self.default_page_size
        except ValueError:
            raise GoogleError(400, "Invalid pageSize") from None
        size = min(size, self.max_page_size)
        mask = [p for p in (q.get("readMask") or "").split(",") if p]
        for p in mask:
            if p.split(".")[0] not in _FIELDS:
                raise GoogleError(400, f"Invalid read_mask path {p!r}")
        after = self._decode_token(q.get("pageToken", ""), text)
        ordered = sorted(self.jobs.values(), key=lambda j: (j.create_ns, j.data["name"]), reverse=True)
        out, last = [], None
        for j in ordered:
            key = (j.create_ns, j.data["name"])
            if after is not None and key >= after:
                continue
            if not filters.evaluate(tree, self._compare, j):
                continue
            if len(out) == size:
                break
            out.append(_masked(j.render(int_enums), mask))
            last = key
        else:
            last = None  # ran off the end: no more pages
        body: dict = {"customJobs": out} if out else {}
        if last is not None and len(out) == size:
            body["nextPageToken"] = self._encode_token(last, text)
        return 200, body

    def _check_restriction(self, r: filters.Restriction) -> None:
        if r.field == "state":
            if r.op not in ("=", "!="):
                raise filters.FilterError("state supports = and != only")
            if r.value not in STATE_NAMES:
                raise filters.FilterError(f"unknown state {r.value}")
        elif r.field == "display_name":
            if r.op not in ("=", "!=", ":"):
                raise filters.FilterError("display_name supports =, != and :")
        elif r.field == "create_time":
            if r.op == ":":
                raise filters.FilterError("create_time does not support :")
            filters.timestamp_ns(r.value)
        elif r.field.startswith("labels."):
            if r.op not in ("=", "!=", ":"):
                raise filters.FilterError("labels support =, != and :*")
        else:
            raise filters.FilterError(f"unsupported field {r.field!r}")

    @staticmethod
    def _compare(job: _Job, r: filters.Restriction) -> bool:
        d = job.data
        if r.field == "state":
            return filters.compare_values(d.get("state"), r.op, r.value)
        if r.field == "display_name":
            if r.op == ":":
                return fnmatch.fnmatchcase(d.get("displayName", ""), r.value)
            return filters.compare_values(d.get("displayName", ""), r.op, r.value)
        if r.field == "create_time":
            return filters.compare_values(job.create_ns, r.op, filters.timestamp_ns(r.value))
        key = r.field[len("labels."):]
        labels = d.get("labels", {})
        if r.op == ":":
            return key in labels if r.value == "*" else labels.get(key) == r.value
        return filters.compare_values(labels.get(key), r.op, r.value)

    @staticmethod
    def _encode_token(key: tuple[int, str], text: str) -> str:
        raw = json.dumps({"k": list(key), "f": text})
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @staticmethod
    def _decode_token(token: str, text: str) -> tuple[int, str] | None:
        if not token:
            return None
        try:
            raw = json.loads(base64.urlsafe_b64decode(token.encode()))
        except ValueError:
            raise GoogleError(400, "Invalid page token") from None
        if raw.get("f") != text:
            raise GoogleError(400, "The page token does not match the request's filter")
        return (raw["k"][0], raw["k"][1])

    def _cancel(self, name: str, req: Request) -> tuple[int, dict]:
        try:
            v1.CancelCustomJobRequest.from_json(req.body.decode() or "{}", ignore_unknown_fields=False)
        except (json_format.ParseError, ValueError) as e:
            raise GoogleError(400, f"Invalid JSON payload received. {e}") from None
        job = self._lookup_name(name)
        state = job.data["state"]
        if state in TERMINAL:
            raise GoogleError(400, f"Cannot cancel CustomJob {name} in state {state}.",
                              status="FAILED_PRECONDITION")
        if state != "JOB_STATE_CANCELLING":
            self.set_state(name, "JOB_STATE_CANCELLING")
        if self.cancel_immediately:
            self.set_state(name, "JOB_STATE_CANCELLED", error=(1, "CANCELED"))
        return 200, {}

    def _delete(self, name: str) -> tuple[int, dict]:
        job = self._lookup_name(name)
        if job.data["state"] not in TERMINAL:
            raise GoogleError(400, f"CustomJob {name} is {job.data['state']}; cancel it before deleting it.",
                              status="FAILED_PRECONDITION")
        del self.jobs[name]
        self._scripts.pop(name, None)
        op_name = f"{name}/operations/{next(self._op_ids)}"
        op = {"name": op_name, "done": True,
              "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                           "genericMetadata": {"createTime": filters.ns_to_rfc3339(self._now_ns()),
                                               "updateTime": filters.ns_to_rfc3339(self._now_ns())}},
              "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}
        self.operations[op_name] = op
        return 200, op

    def _get_operation(self, name: str) -> tuple[int, dict]:
        op = self.operations.get(name)
        if op is None:
            raise GoogleError(404, f"Operation {name} does not exist.")
        return 200, op


def _masked(job: dict, mask: list[str]) -> dict:
    if not mask:
        return job
    out: dict = {}
    for path in mask:
        src, dst = job, out
        parts = path.split(".")
        for i, part in enumerate(parts):
            if not isinstance(src, dict) or part not in src:
                break
            if i == len(parts) - 1:
                dst[part] = src[part]
            else:
                src = src[part]
                dst = dst.setdefault(part, {})
    return out
