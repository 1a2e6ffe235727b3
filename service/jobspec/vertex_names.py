"""Names of the Vertex AI resources a template may name (CustomJobSpec.persistentResourceId,
tensorboard, experiment, experimentRun; models.upload), built and checked without I/O.

Formats as Google's CustomJobSpec reference gives them (docs/vertex.md):
  tensorboard     projects/{project}/locations/{location}/tensorboards/{tensorboard}
  experiment      projects/{project}/locations/{location}/metadataStores/{store}/contexts/{experiment}
  experiment_run  projects/{project}/locations/{location}/metadataStores/{store}/contexts/{experiment}-{run}
A template gives an experiment by name (the job's project and region, the `default` metadata
store) or by its full name; a run by a pattern in which {job_id} is the job's id."""
from __future__ import annotations

import re

from service.core.errors import Problem

JOB_ID_PLACEHOLDER = "{job_id}"
DEFAULT_METADATA_STORE = "default"
MAX_CONTEXT_ID = 128
_CONTEXT_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SAMPLE_JOB_ID = "00000000-0000-0000-0000-000000000000"   # a job id's length and alphabet
_PARAM = re.compile(r"\$\{[^}]*\}")
_FULL = re.compile(r"^projects/([^/]+)/locations/([^/]+)/(?:tensorboards|metadataStores)/.+$")


def location_of(name: str) -> str | None:
    """The region in a full resource name; None for a bare name (the job's own region)."""
    m = _FULL.match(name)
    return m.group(2) if m else None


def experiment_id(experiment: str) -> str:
    return experiment.rsplit("/", 1)[-1]


def experiment_name(experiment: str, project: str, location: str) -> str:
    if "/" in experiment:
        return experiment
    return f"projects/{project}/locations/{location}/metadataStores/{DEFAULT_METADATA_STORE}/contexts/{experiment}"


def run_id(pattern: str, job_id: str) -> str:
    return pattern.replace(JOB_ID_PLACEHOLDER, str(job_id))


def experiment_run_name(experiment: str, pattern: str, job_id: str, project: str, location: str) -> str:
    """The run's Context: its id is `<experiment>-<run>`, in the experiment's metadata store."""
    store = experiment_name(experiment, project, location).rsplit("/", 1)[0]
    return f"{store}/{experiment_id(experiment)}-{run_id(pattern, job_id)}"


def check_run(experiment: str | None, pattern: str | None) -> list[Problem]:
    """The run name pattern, with parameters substituted, as any job id would expand it."""
    if pattern is None:
        return []
    if experiment is None:
        return [Problem("experiment_run", "an experiment run needs its experiment",
                        "set experiment (an experiment name) too, or remove experiment_run")]
    # A stored template still has its ${param}s: each stands for a value checked per job.
    run = _PARAM.sub("p", run_id(pattern, _SAMPLE_JOB_ID))
    context = f"{experiment_id(experiment)}-{run}"
    if not _CONTEXT_ID.match(run):
        return [Problem("experiment_run", f"the run name {pattern!r} gives {run!r}: Vertex AI takes lowercase "
                        "letters, digits and hyphens only", "use e.g. \"run-{job_id}\" (parameters' values must "
                        "be lowercase letters, digits and hyphens too)")]
    if len(context) > MAX_CONTEXT_ID:
        return [Problem("experiment_run", f"the run's id <experiment>-<run> is {len(context)} characters with a "
                        f"job id in it; Vertex AI allows {MAX_CONTEXT_ID}", "shorten the run name or the experiment")]
    return []
