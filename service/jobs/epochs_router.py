"""GET /v1/jobs/{id}/epochs: a job's per-epoch metrics, the data the UI's charts draw."""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from service.auth.deps import Viewer
from service.jobs import epochs
from service.jobs import service as jobs
from service.web.container import SessionDep
from service.web.problems import problem_responses

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class EpochOut(BaseModel):
    epoch: int
    metrics: dict[str, float | int | None] = Field(
        description="The chief's metrics at the end of the epoch (loss, accuracy, val_*); null where the "
                    "value was not a finite number (e.g. a diverged loss)")
    steps: int | None = None
    seconds: float | None = None
    at: datetime = Field(description="When the epoch's line was written")


class EpochPage(BaseModel):
    job_id: uuid.UUID
    items: list[EpochOut]
    next_after: int | None = Field(None, description="More epochs follow: pass this as `after`")


@router.get("/{job_id}/epochs", response_model=EpochPage, operation_id="jobs_epochs",
            responses=problem_responses(401, 404, 422, 503),
            summary="A job's per-epoch metrics, oldest first (the latest TRAINJOBS_JOB_EPOCHS_MAX_PER_JOB kept)")
def job_epochs(job_id: uuid.UUID, session: SessionDep, actor: Viewer,
               after: Annotated[int | None, Query(ge=0, description="Only epochs after this one")] = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 1000):
    jobs.get_job(session, actor.team_id, job_id)  # 404 for a missing job or another team's
    rows = epochs.list_epochs(session, job_id, after=after, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return EpochPage(job_id=job_id, items=[EpochOut(epoch=r.epoch, metrics=r.metrics, steps=r.steps,
                                                    seconds=r.seconds, at=r.at) for r in rows],
                     next_after=rows[-1].epoch if more else None)
