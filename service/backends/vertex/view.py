"""The CustomJob exactly as the vertex backend sends it, and what that gives each replica.

The compiler's CustomJob is the template's; the backend adds its own defaults when
the template sets none: the job-id label, `baseOutputDirectory` = the service's
default output directory + `/<job id>`, and the service account. Vertex then sets
AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR from that directory
on every replica, and puts the CustomJobSpec as sent into TF_CONFIG and
CLUSTER_SPEC. The create and the job view are built from this one function, so
what a person reads is what Google received."""
from __future__ import annotations

import copy
import dataclasses
import json
import uuid

from service.jobspec import CompiledJob, vertex_names
from service.jobspec.reserved import JOB_ID_LABEL
from service.lifecycle.protocol import LaunchView, tensorboard_of


def effective(compiled: CompiledJob, job_id: uuid.UUID | str, *, base_output_directory: str | None,
              service_account: str | None, project: str | None = None,
              location: str | None = None) -> CompiledJob:
    """The compiled job with the backend's defaults applied (a new object; the stored one is untouched)."""
    cj = copy.deepcopy(compiled.custom_job_dict)
    spec_tf = copy.deepcopy(compiled.job_spec_dict)   # TF_CONFIG["job"]: proto field names
    cj.setdefault("labels", {})[JOB_ID_LABEL] = str(job_id)
    spec = cj.setdefault("jobSpec", {})
    if base_output_directory and not (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"):
        # A retry attempt writes where its first attempt did: it resumes from those checkpoints.
        prefix = f"{base_output_directory.rstrip('/')}/{compiled.output_of or job_id}"
        spec["baseOutputDirectory"] = {"outputUriPrefix": prefix}
        spec_tf["base_output_directory"] = {"output_uri_prefix": prefix}
    if service_account and not spec.get("serviceAccount"):
        spec["serviceAccount"] = service_account
        spec_tf["service_account"] = service_account
    extras = compiled.vertex or {}
    if extras.get("experiment") and project and location:
        # Named by the template, resolved here: only the backend knows the project and region.
        experiment = vertex_names.experiment_name(extras["experiment"], project, location)
        spec["experiment"] = spec_tf["experiment"] = experiment
        if extras.get("experiment_run"):
            run = vertex_names.experiment_run_name(extras["experiment"], extras["experiment_run"], str(job_id),
                                                   project, location)
            spec["experimentRun"] = spec_tf["experiment_run"] = run
    return dataclasses.replace(compiled, custom_job_json=json.dumps(cj, separators=(",", ":")),
                               job_spec_json=json.dumps(spec_tf, separators=(",", ":")))


def launch_view(compiled: CompiledJob, resources: dict | None = None) -> LaunchView:
    """Vertex gives each replica TF_CONFIG, CLUSTER_SPEC and the AIP_* directories of the
    job it received; cluster addresses are Vertex's own host names (shown as task names).
    A CustomJob's TF_CONFIG has no `task.trial`: a sweep trial's id is in its env only."""
    logs, url = tensorboard_of(compiled)
    return LaunchView(compiled.custom_job_dict, {r.task_name: compiled.env(r, trial_in_task=False)
                                                 for r in compiled.replicas}, resources or {},
                      tensorboard_dir=logs, tensorboard_url=url)
