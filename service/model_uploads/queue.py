"""The queue of model uploads: a row per job, made in the transaction that records SUCCEEDED
(an engine listener), and how the upload went for the job view. Light: no backend, no client."""
from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from service.lifecycle.engine import Change
from service.lifecycle.protocol import ModelClient, UploadsModels
from service.lifecycle.states import JobState
from service.persistence.models import Job, ModelUpload

ACTOR = "model-upload"
ACTIVE = ("pending", "uploading")


def plan_of(compiled: dict | None) -> dict | None:
    return ((compiled or {}).get("vertex") or {}).get("model_upload") if isinstance(compiled, dict) else None


class UploadQueue:
    """Engine listener: a job with a model upload just SUCCEEDED on a backend that uploads
    models (`uploading`: the names of the enabled backends with the UploadsModels role):
    queue its upload, in the same transaction, once."""

    def __init__(self, uploading: Collection[str]) -> None:
        self.uploading = frozenset(uploading)

    def on_change(self, session: Session, change: Change) -> None:
        if change.to_state != JobState.SUCCEEDED or not self.uploading:
            return
        row = session.execute(select(Job.backend, Job.compiled).where(Job.id == change.job_id)).one_or_none()
        if row is None or row.backend not in self.uploading or not plan_of(row.compiled):
            return
        if session.scalar(select(ModelUpload.job_id).where(ModelUpload.job_id == change.job_id)) is not None:
            return
        session.execute(insert(ModelUpload).values(job_id=change.job_id, state="pending", attempts=0,
                                                   next_at=change.at, updated_at=change.at))


def view_of(row: ModelUpload | None, client: ModelClient | None = None) -> dict | None:
    """The job view's `model_upload`: how the upload went (and, where the job's backend gives
    one, the page that shows the model)."""
    if row is None:
        return None
    out = {"state": row.state, "attempts": row.attempts, "updated_at": row.updated_at.isoformat()}
    if row.model:
        out["model"] = row.model
        link = client.console_url(row.model) if client is not None else None
        if link:
            out["console_url"] = link
    if row.message:
        out["message"] = row.message
    return out


def view(session: Session | None, job_id: uuid.UUID, backend: object = None) -> dict | None:
    """`view_of` the job's upload; `backend`: the job's backend, if enabled here."""
    if session is None:
        return None
    client = backend.upload_client() if isinstance(backend, UploadsModels) else None
    return view_of(session.get(ModelUpload, job_id), client)
