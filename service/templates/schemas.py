from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.config import JsonDict

from service.core.schema_base import RequestBody
from service.core.text import MultilineText
from service.jobspec.spec import JobSpec, Parameter

TEMPLATE_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
TemplateName = Annotated[str, StringConstraints(pattern=TEMPLATE_NAME_PATTERN)]
# Versions are INTEGER columns: PostgreSQL's holds up to 2**31 - 1 (a larger number is an error, not a miss).
MAX_VERSION = 2**31 - 1

_EXAMPLE: JsonDict = {
    "description": "Chief and two workers, MultiWorkerMirroredStrategy",
    "spec": {"distribution": "multi_worker_mirrored",
             "container": {"image_uri": "trainjobs-trainer:latest", "command": ["python", "-m", "trainer.task"],
                           "args": ["--dataset=synthetic", "--model=tiny_cnn", "--epochs=${epochs}"]},
             "chief": {"machine_type": "n1-standard-4"},
             "workers": {"machine_type": "n1-standard-4", "replica_count": 2},
             "base_output_directory": "gs://my-bucket/runs"},
    "parameters": [{"name": "epochs", "type": "int", "default": 2, "minimum": 1, "maximum": 100}],
}


class TemplateBody(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [_EXAMPLE]})

    description: Annotated[str, StringConstraints(max_length=4096), MultilineText] = ""
    spec: JobSpec
    parameters: list[Parameter] = Field(default_factory=list, max_length=100)


class TemplateCreate(TemplateBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "mwms-small", **_EXAMPLE}]})

    name: TemplateName = Field(description="Lowercase letters, digits and -, starting with a letter.")


class TemplateOut(BaseModel):
    name: str
    version: int = Field(description="The version shown here.")
    latest_version: int
    archived: bool
    description: str
    spec: dict
    parameters: list[dict]
    created_at: datetime = Field(description="When this version was written.")
    created_by: str


class TemplatePreview(BaseModel):
    """POST /v1/templates?dry_run=true: the template as it would be stored (defaults filled in,
    nulls dropped), checked as every template is; nothing stored. `trainjobs templates apply`
    compares a file in this form with the stored version."""

    name: str
    description: str
    spec: dict
    parameters: list[dict]


class TemplateSummary(BaseModel):
    name: str
    latest_version: int
    archived: bool
    description: str
    updated_at: datetime


class TemplatePage(BaseModel):
    items: list[TemplateSummary]
    next_cursor: str | None = None


class VersionSummary(BaseModel):
    version: int
    description: str
    created_at: datetime
    created_by: str
