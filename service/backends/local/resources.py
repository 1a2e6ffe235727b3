"""What the Vertex-only names of a template mean for a local job (issue 26, point 7), for the
job view's `resources`:

- TensorBoard: the trainer writes its TensorBoard logs to AIP_TENSORBOARD_LOG_DIR
  (`<output>/logs/`) here as on Vertex; the view gives that folder and the command that serves
  it. A template's Vertex TensorBoard instance is not used: nothing uploads local logs.
- The model: AIP_MODEL_DIR (`<output>/model/`) is the upload candidate, the folder a Vertex
  job's `model_upload` would send to the Model Registry; nothing is uploaded from here.
- A persistent resource, an experiment and its run are Vertex AI's alone: shown, marked so."""
from __future__ import annotations

import shlex
from typing import Any

from service.jobspec import CompiledJob

VERTEX_ONLY = "Vertex AI only: the local backend does not use it"


def view(compiled: CompiledJob, output_dir: str) -> dict:
    base = output_dir.rstrip("/")
    spec = compiled.custom_job_dict.get("jobSpec", {})
    extras = compiled.vertex or {}
    logs = f"{base}/logs/"
    tensorboard: dict[str, Any] = {"log_dir": logs, "command": f"tensorboard --logdir {shlex.quote(logs)}",
                   "note": "the trainer's TensorBoard logs (AIP_TENSORBOARD_LOG_DIR); serve them with the command"}
    if spec.get("tensorboard"):
        tensorboard.update(name=spec["tensorboard"], vertex_only=True,
                           note=f"the Vertex AI TensorBoard instance is {VERTEX_ONLY}; the trainer's TensorBoard "
                                "logs are in log_dir (AIP_TENSORBOARD_LOG_DIR): serve them with the command")
    out: dict = {"tensorboard": tensorboard}
    if spec.get("persistentResourceId"):
        out["persistent_resource"] = {"name": spec["persistentResourceId"], "vertex_only": True,
                                      "note": f"{VERTEX_ONLY}: replicas are processes on this host"}
    if extras.get("experiment"):
        out["experiment"] = {"name": extras["experiment"], "vertex_only": True, "note": VERTEX_ONLY}
        if extras.get("experiment_run"):
            out["experiment_run"] = {"name": extras["experiment_run"], "vertex_only": True, "note": VERTEX_ONLY}
    model = {"artifact_uri": f"{base}/model/", "candidate": True,
             "note": "the model the trainer saves (AIP_MODEL_DIR): what a Vertex job's model_upload would upload"}
    if extras.get("model_upload"):
        model.update(extras["model_upload"], vertex_only=True,
                     note="the upload to the Model Registry is Vertex AI only: nothing is uploaded from this host; "
                          "artifact_uri is the model the trainer saves (AIP_MODEL_DIR), the upload candidate")
    out["model_upload"] = model
    return out
