"""The queue of model uploads (service/backends/vertex/model_upload.py does them): what the
API process needs of it, without Google's client libraries (a light import for create_app)."""
from __future__ import annotations

import uuid

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from service.lifecycle.states import JobState
from service.persistence.models import Job, ModelUpload

ACTOR = "model-upload"
ACTIVE = ("pending", "uploading")


def model_id(job_id: uuid.UUID | str) -> str:
    """UploadModelRequest.modelId: up to 63 of [a-z0-9_-], not starting with a digit or hyphen."""
    return f"trainjobs-{job_id}"


def plan_of(compiled: dict | None) -> dict | None:
    return ((compiled or {}).get("vertex") or {}).get("model_upload") if isinstance(compiled, dict) else None


def on_change(session: Session, change) -> None:
    """Engine listener: a vertex job with a model upload just SUCCEEDED: queue its upload, in
    the same transaction."""
    if change.to_state != JobState.SUCCEEDED:
        return
    row = session.execute(select(Job.backend, Job.compiled).where(Job.id == change.job_id)).one_or_none()
    if row is None or row.backend != "vertex" or not plan_of(row.compiled):
        return
    if session.scalar(select(ModelUpload.job_id).where(ModelUpload.job_id == change.job_id)) is not None:
        return
    session.execute(insert(ModelUpload).values(job_id=change.job_id, state="pending", attempts=0,
                                               next_at=change.at, updated_at=change.at))


def view_of(row: ModelUpload | None) -> dict | None:
    """The job view's `model_upload`: how the upload went."""
    if row is None:
        return None
    out = {"state": row.state, "attempts": row.attempts, "updated_at": row.updated_at.isoformat()}
    if row.model:
        out["model"] = row.model
        parts = row.model.split("/")   # projects/P/locations/L/models/ID
        if len(parts) == 6:
            out["console_url"] = (f"https://console.cloud.google.com/vertex-ai/models/locations/{parts[3]}"
                                  f"/models/{parts[5]}?project={parts[1]}")
    if row.message:
        out["message"] = row.message
    return out


def view(session: Session | None, job_id: uuid.UUID) -> dict | None:
    if session is None:
        return None
    return view_of(session.get(ModelUpload, job_id))
