from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.config import JsonDict

from service.core.schema_base import FieldProblem, RequestBody
from service.core.text import MultilineText
from service.templates.schemas import TemplateName, TemplateOut

ImportFormat = Literal["aiplatform-config", "vertex-config", "gcloud", "worker-pool-specs"]
ExportFormat = Literal["gcloud", "config", "sdk"]
# Each text is bounded by TRAINJOBS_IMPORT_MAX_BYTES in the service; these only keep a hostile body small.
PoolSpecText = Annotated[str, StringConstraints(max_length=4096)]

_EXAMPLE: JsonDict = {"format": "aiplatform-config", "name": "legacy-census", "dry_run": False,
            "source": "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-highcpu-16\n"
                      "  masterConfig: {imageUri: gcr.io/my-project/trainer:1}\n"
                      "  workerType: complex_model_m\n  workerCount: 2\n  args: [--epochs, '5']\n"}


class TemplateImport(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [_EXAMPLE]})

    format: ImportFormat = Field(description="aiplatform-config: the YAML of `gcloud ai-platform jobs submit "
                                             "training --config` (a TrainingInput, with or without its "
                                             "`trainingInput:` wrapper); vertex-config: the YAML of `gcloud ai "
                                             "custom-jobs create --config` (a CustomJobSpec); gcloud: a "
                                             "`gcloud ai custom-jobs create` command line; worker-pool-specs: a list of "
                                             "`--worker-pool-spec` "
                                             "values, one per pool in pool order (\"\" for an empty pool)")
    source: str | Annotated[list[PoolSpecText], Field(max_length=16)] = Field(
        description="The text (a list for worker-pool-specs)")
    name: TemplateName | None = Field(None, description="Store the result as this new template "
                                                        "(omit it to only convert)")
    description: Annotated[str, StringConstraints(max_length=4096), MultilineText] | None = Field(
        None, description="The template's description. Default: where it was imported from")
    dry_run: bool = Field(False, description="Convert and validate only; store nothing even with a name")


class TemplateImportOut(BaseModel):
    format: ImportFormat
    description: str
    spec: dict = Field(description="The template spec produced, with defaults filled in, as it is stored")
    parameters: list[dict]
    warnings: list[FieldProblem] = Field(description="What was mapped or left out, each with its source path")
    template: TemplateOut | None = Field(None, description="The stored template (when a name was given and not "
                                                           "dry_run)")
