from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from service.lifecycle.states import JobState


class LogLineOut(BaseModel):
    replica: str = Field(description="Task name, e.g. workerpool1-0")
    stream: str = Field(description="stdout or stderr (local); the entry's severity (Vertex)")
    timestamp: datetime = Field(description="When the line was written")
    message: str
    cursor: str = Field(description="Pass as `since` (or Last-Event-ID) to read what comes after this line")


class LogPageOut(BaseModel):
    job_id: uuid.UUID
    state: JobState = Field(description="The job's state when the page was read")
    lines: list[LogLineOut]
    cursor: str | None = Field(description="Resume point after the last line: pass it as `since`")
    done: bool = Field(description="The job has ended and every line up to its end has been read")
