"""The model-upload domain's slice of the settings (TRAINJOBS_VERTEX_MODEL_UPLOAD*: Vertex AI's
Model Registry is the one registry a backend offers today)."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from service.core.section import Section


@dataclass(frozen=True)
class UploadSettings:
    max_attempts: int        # TRAINJOBS_VERTEX_MODEL_UPLOAD_MAX_ATTEMPTS
    per_pass: int            # TRAINJOBS_VERTEX_MODEL_UPLOADS_PER_PASS
    retry_seconds: float     # TRAINJOBS_VERTEX_MODEL_UPLOAD_RETRY_SECONDS
    interval: float          # TRAINJOBS_RECONCILE_INTERVAL_SECONDS: how often due uploads are looked for


class UploadEnv(Section):
    """Model uploads to Vertex AI's Model Registry, made by the controller."""

    vertex_model_upload_max_attempts: int = Field(
        5, ge=1, le=100, description="Uploads of one job's model tried (each after a lookup by its job-id label) "
                                     "before the upload is recorded as failed; the job stays SUCCEEDED")
    vertex_model_uploads_per_pass: int = Field(
        5, ge=1, le=1000, description="Model uploads (or their lookups) the controller makes in one pass; "
                                      "the rest wait for the next")
    vertex_model_upload_retry_seconds: float = Field(
        60.0, ge=0, le=86400, description="After a model upload's answer was lost or refused for now "
                                          "(429, 5xx, a timeout), the next try waits this long")
