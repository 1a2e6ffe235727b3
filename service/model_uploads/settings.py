"""The model-upload domain's slice of the settings (TRAINJOBS_VERTEX_MODEL_UPLOAD*: Vertex AI's
Model Registry is the one registry a backend offers today)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UploadSettings:
    max_attempts: int        # TRAINJOBS_VERTEX_MODEL_UPLOAD_MAX_ATTEMPTS
    per_pass: int            # TRAINJOBS_VERTEX_MODEL_UPLOADS_PER_PASS
    retry_seconds: float     # TRAINJOBS_VERTEX_MODEL_UPLOAD_RETRY_SECONDS
    interval: float          # TRAINJOBS_RECONCILE_INTERVAL_SECONDS: how often due uploads are looked for
