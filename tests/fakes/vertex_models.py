"""A fake of the Vertex AI ModelService REST API (models.upload, models.list, models.get), on the
same 127.0.0.1 server as the JobService fake (tests/fakes/vertex_jobs.py routes /models paths
here), as Google serves both from one regional endpoint.

It speaks what `aiplatform_v1.ModelServiceClient(transport="rest")` sends and parses
(google-cloud-aiplatform 2.7.0):
  POST /v1/{parent}/models:upload  body UploadModelRequest without `parent`
       -> a long-running Operation; done at once, its `response` an UploadModelResponse
  GET  /v1/{parent}/models?filter=labels.k="v"&pageSize=&pageToken=  -> {models[], nextPageToken}
  GET  /v1/{parent}/models/{id}  -> Model
It is strict where Google is: the body is parsed with the aiplatform_v1 types refusing unknown
fields; `model.displayName` is required; a `modelId` already used is 409 ALREADY_EXISTS; the
model's labels follow Google's label rules.

    fake.models.fail("upload", 503, apply=True)   # make the model, then lose the answer
    fake.models.fail("upload", 400, "bad image")   # refuse it
    fake.models.models                              # name -> the Model as stored (JSON)
"""
from __future__ import annotations

import itertools
import json
import re
from collections import Counter, deque

from google.cloud import aiplatform_v1 as v1

from tests.fakes import filters
from tests.fakes.server import GoogleError, Request

_UPLOAD = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/models:upload$")
_LIST = re.compile(r"^/v1/projects/([^/]+)/locations/([^/]+)/models$")
_GET = re.compile(r"^/v1/(projects/([^/]+)/locations/([^/]+)/models/([^/:@]+))$")
_MODEL_ID = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")
_LABEL = re.compile(r'^labels\.([a-z][a-z0-9_-]*)\s*=\s*"([^"]*)"$')


class FakeModels:
    def __init__(self, jobs) -> None:
        self.jobs = jobs                       # the FakeJobService: project, location, lock, clock, label rules
        self.models: dict[str, dict] = {}
        self.calls: Counter[str] = Counter()
        self.uploads: list[dict] = []          # every upload body received, in order
        self._faults: dict[str, deque] = {}
        self._ids = itertools.count(1_000_000_001)
        self._ops = itertools.count(1)

    def fail(self, method: str, status: int, message: str = "error", *, times: int = 1, apply: bool = False):
        """The next `times` calls of `method` (upload|list|get) answer `status`; apply: do the work first."""
        from tests.fakes.vertex_jobs import Fault
        with self.jobs._lock:
            self._faults.setdefault(method, deque()).extend(Fault(status, message, apply=apply) for _ in range(times))

    def handles(self, path: str) -> bool:
        return bool(_UPLOAD.match(path) or _LIST.match(path) or _GET.match(path))

    def handle(self, req: Request) -> tuple[int, dict]:
        if (m := _UPLOAD.match(req.path)) and req.method == "POST":
            self._parent(m.group(1), m.group(2))
            return self._call("upload", lambda: self._upload(req))
        if (m := _LIST.match(req.path)) and req.method == "GET":
            self._parent(m.group(1), m.group(2))
            return self._call("list", lambda: self._list(req))
        if (m := _GET.match(req.path)) and req.method == "GET":
            self._parent(m.group(2), m.group(3))
            return self._call("get", lambda: self._get(m.group(1)))
        raise GoogleError(404, f"no route for {req.method} {req.path}")

    def _parent(self, project: str, location: str) -> None:
        if (project, location) != (self.jobs.project, self.jobs.location):
            raise GoogleError(404, f"projects/{project}/locations/{location} not found")

    def _call(self, method: str, work) -> tuple[int, dict]:
        with self.jobs._lock:
            self.calls[method] += 1
            fault = self._faults.get(method, deque()).popleft() if self._faults.get(method) else None
            if fault is not None and not fault.apply:
                raise GoogleError(fault.status, fault.message)
            result = work()
            if fault is not None:
                raise GoogleError(fault.status, fault.message)
            return result

    def _upload(self, req: Request) -> tuple[int, dict]:
        body = req.json()
        if "parent" in body:
            raise GoogleError(400, "parent travels in the path, not the body")
        try:   # strict: unknown fields are a 400, as Google's JSON parser says
            request = v1.UploadModelRequest.from_json(json.dumps(body), ignore_unknown_fields=False)
        except Exception as e:
            raise GoogleError(400, f"Invalid JSON payload received. {e}") from None
        model = json.loads(v1.Model.to_json(request.model, use_integers_for_enums=False,
                                            always_print_fields_with_no_presence=False))
        if not model.get("displayName"):
            raise GoogleError(400, "model.display_name is required")
        if len(model["displayName"]) > 128:
            raise GoogleError(400, "model.display_name is longer than 128 characters")
        from tests.fakes.vertex_jobs import label_ok
        bad = [k for k, v in (model.get("labels") or {}).items() if not label_ok(k, v)]
        if bad or len(model.get("labels") or {}) > 64:
            raise GoogleError(400, f"invalid labels: {bad}")
        if not (model.get("containerSpec") or {}).get("imageUri"):
            raise GoogleError(400, "model.container_spec.image_uri is required for a custom-trained model")
        model_id = request.model_id or str(next(self._ids))
        if not _MODEL_ID.match(model_id):
            raise GoogleError(400, f"model_id {model_id!r}: up to 63 of [a-z0-9_-], not starting with a digit "
                                   "or hyphen")
        parent = f"projects/{self.jobs.project}/locations/{self.jobs.location}"
        name = f"{parent}/models/{model_id}"
        if name in self.models:
            raise GoogleError(409, f"Model {name} already exists")
        now = filters.ns_to_rfc3339(self.jobs.clock.now_ns())
        model.update(name=name, versionId="1", createTime=now, updateTime=now)
        self.models[name] = model
        self.uploads.append(body)
        op = f"{name}/operations/{next(self._ops)}"
        return 200, {"name": op, "done": True,
                     "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelOperationMetadata"},
                     "response": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse",
                                  "model": name, "modelVersionId": "1"}}

    def _list(self, req: Request) -> tuple[int, dict]:
        want = req.query.get("filter", "").strip()
        match = None
        if want:
            m = _LABEL.match(want)
            if m is None:
                raise GoogleError(400, f"the fake understands labels.k=\"v\" filters only, not {want!r}")
            match = (m.group(1), m.group(2))
        found = [d for d in self.models.values()
                 if match is None or (d.get("labels") or {}).get(match[0]) == match[1]]
        size = int(req.query.get("pageSize") or 100)
        start = int(req.query.get("pageToken") or 0)
        out = {"models": found[start:start + size]}
        if start + size < len(found):
            out["nextPageToken"] = str(start + size)
        return 200, out

    def _get(self, name: str) -> tuple[int, dict]:
        if name not in self.models:
            raise GoogleError(404, f"Model {name} not found")
        return 200, self.models[name]
