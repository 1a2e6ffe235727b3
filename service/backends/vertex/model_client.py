"""The vertex backend's model client (lifecycle.protocol.ModelClient): the Model Registry calls
of a model upload after a job SUCCEEDED (template `model_upload`; issue 26, point 1). The rows,
the once-per-job guarantees and the job's events are the model-upload domain's
(service/model_uploads/); this module only talks to Google, one budgeted attempt a call.

The Model: displayName (the template's, else the job's), artifactUri = AIP_MODEL_DIR
(`<base output directory>/model/`, where the trainer saved it), containerSpec.imageUri = the
serving image, labels = the template's plus the job-id label. It is uploaded under the Model ID
`trainjobs-<job id>` (UploadModelRequest.modelId), so an upload that landed after all is
409 ALREADY_EXISTS at Google rather than a second Model, and found by its label
(models.list `labels.trainjobs_job_id="<id>"`) after a lost answer."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1

from service.backends.vertex import errors
from service.backends.vertex.budget import BudgetSpent
from service.jobspec import CompiledJob
from service.jobspec.reserved import JOB_ID_LABEL
from service.lifecycle.protocol import BudgetExhausted, PermanentBackendError, TransientBackendError

if TYPE_CHECKING:   # the backend owns its client: a type only, no import cycle at run time
    from service.backends.vertex.backend import VertexBackend

log = logging.getLogger("trainjobs.vertex.models")


def model_id(job_id: str) -> str:
    """UploadModelRequest.modelId: up to 63 of [a-z0-9_-], not starting with a digit or hyphen."""
    return f"trainjobs-{job_id}"


class VertexModelClient:
    def __init__(self, backend: VertexBackend) -> None:
        self.backend = backend   # its config, budget and clients

    def plan(self, job_id: str, compiled: CompiledJob, display_name: str) -> v1.Model | None:
        plan = (compiled.vertex or {}).get("model_upload") or {}
        base = self.backend.effective(job_id, compiled).base_output_directory
        if not base:
            return None
        return v1.Model(display_name=plan.get("display_name") or display_name,
                        artifact_uri=f"{base.rstrip('/')}/model/",
                        container_spec=v1.ModelContainerSpec(image_uri=plan["serving_container_image_uri"]),
                        labels={**(plan.get("labels") or {}), JOB_ID_LABEL: job_id})

    def upload(self, job_id: str, plan: object) -> str:
        assert isinstance(plan, v1.Model)
        b = self.backend
        timeout = b.cfg.create_timeout

        def call():
            op = b.model_client.upload_model(
                request=v1.UploadModelRequest(parent=b.cfg.parent, model=plan, model_id=model_id(job_id)),
                retry=None, timeout=timeout)
            # The fake (and a quick Google) answers done; otherwise the label lookup finds it later.
            if not op.done():
                raise gexc.DeadlineExceeded(f"upload operation {op.operation.name} still running")
            return op.result(timeout=0).model
        try:
            return _answered(lambda: b.calls.call(b.budget.create, call))
        except gexc.Conflict:   # 409 ALREADY_EXISTS: our Model ID is taken, by our own earlier upload
            return f"{b.cfg.parent}/models/{model_id(job_id)}"

    def find(self, job_id: str) -> str | None:
        b = self.backend
        pager = _answered(lambda: b.calls.call(b.budget.crud, lambda: b.model_client.list_models(
            request=v1.ListModelsRequest(parent=b.cfg.parent, filter=f'labels.{JOB_ID_LABEL}="{job_id}"',
                                         page_size=10),
            retry=None, timeout=b.cfg.request_timeout)))
        for m in pager.models:   # one page: a job has at most one Model with its label
            return m.name
        return None

    def console_url(self, model: str) -> str | None:
        parts = model.split("/")   # projects/P/locations/L/models/ID
        if len(parts) != 6:
            return None
        return (f"https://console.cloud.google.com/vertex-ai/models/locations/{parts[3]}"
                f"/models/{parts[5]}?project={parts[1]}")


def _answered(call):
    """Google's answers as the protocol's errors (a 409 is the caller's to read)."""
    try:
        return call()
    except BudgetSpent as e:
        raise BudgetExhausted(str(e)) from e
    except gexc.Conflict:
        raise
    except Exception as e:
        if errors.is_google_error(e) and not errors.is_transient(e):
            raise PermanentBackendError(_said(e)) from e
        if not errors.is_google_error(e):
            log.exception("a Model Registry call raised")
        raise TransientBackendError(_said(e)) from e


def _said(e: BaseException) -> str:
    code, message, status = errors.google_error(e)
    return f"Vertex AI answered {code} {status or ''}: {message}".replace("  ", " ") if code else str(e)
