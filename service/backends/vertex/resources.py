"""The Vertex AI resources a template names besides the CustomJob (a PersistentResource, a
TensorBoard instance, an experiment and its run, the Model uploaded after success): checked
against the job's project and region at submit, and linked from the job view.

The console addresses are the Google Cloud console's pages for each resource (docs/vertex.md);
they are links for a person, never called by the service."""
from __future__ import annotations

from service.core.errors import Problem
from service.jobspec import CompiledJob, vertex_names

CONSOLE = "https://console.cloud.google.com/vertex-ai"


def region_problems(compiled: CompiledJob, cfg) -> list[Problem]:
    """A resource in another region than the job's cannot serve it: Vertex would refuse the
    create (or the job would fail later). A 422 at submit instead, naming both regions."""
    if cfg is None:
        return []
    spec = compiled.custom_job_dict.get("jobSpec", {})
    named = [("tensorboard", spec.get("tensorboard")),
             ("experiment", (compiled.vertex or {}).get("experiment"))]
    problems = []
    for field, name in named:
        where = vertex_names.location_of(name) if name else None
        if where is not None and where != cfg.location:
            problems.append(Problem(field, f"{name} is in region {where}; this job runs in {cfg.location} "
                                    "(TRAINJOBS_VERTEX_LOCATION), and Vertex AI needs both in one region",
                                    f"name a {field} in {cfg.location}"))
    return problems


def links(custom_job: dict, compiled: CompiledJob, cfg) -> dict[str, str]:
    """Console pages for what the job uses: name -> URL."""
    if cfg is None:
        return {}
    spec = custom_job.get("jobSpec", {})
    q = f"?project={cfg.project}"
    out = {}
    if spec.get("persistentResourceId"):
        out["persistent_resource"] = (f"{CONSOLE}/locations/{cfg.location}/persistent-resources/"
                                      f"{spec['persistentResourceId']}{q}")
    if spec.get("tensorboard"):
        tb = spec["tensorboard"]
        project = tb.split("/")[1]
        out["tensorboard"] = (f"{CONSOLE}/experiments/locations/{cfg.location}/tensorboard-instances/"
                              f"{tb.rsplit('/', 1)[-1]}?project={project}")
    if spec.get("experiment"):
        exp = vertex_names.experiment_id(spec["experiment"])
        out["experiment"] = f"{CONSOLE}/experiments/locations/{cfg.location}/experiments/{exp}/runs{q}"
        if spec.get("experimentRun"):
            run = spec["experimentRun"].rsplit("/", 1)[-1]
            out["experiment_run"] = (f"{CONSOLE}/experiments/locations/{cfg.location}/experiments/{exp}/runs/"
                                     f"{run}/charts{q}")
    return out


def view(compiled: CompiledJob, cfg) -> dict:
    """The job view's `resources`: what the job names, with console links; the model upload
    as planned (its outcome is the job's own `model_upload`)."""
    out: dict = {}
    cj = compiled.custom_job_dict
    spec = cj.get("jobSpec", {})
    links_ = links(cj, compiled, cfg)
    for key, field in (("persistent_resource", "persistentResourceId"), ("tensorboard", "tensorboard"),
                       ("experiment", "experiment"), ("experiment_run", "experimentRun")):
        if spec.get(field):
            out[key] = {"name": spec[field], **({"console_url": links_[key]} if key in links_ else {})}
    upload = (compiled.vertex or {}).get("model_upload")
    if upload is not None:
        base = compiled.base_output_directory
        out["model_upload"] = {**upload, "artifact_uri": f"{base.rstrip('/')}/model/" if base else None,
                               "display_name": upload.get("display_name") or cj.get("displayName")}
    return out
