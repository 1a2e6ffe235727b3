import json

from service import jobspec

IMAGE = "us-docker.pkg.dev/proj/repo/trainer:1"


def spec(**roles) -> dict:
    base = {"container": {"image_uri": IMAGE, "args": ["--epochs=${epochs}"]},
            "chief": {"machine_type": "n1-standard-4"}}
    base.update(roles)
    return base


PARAMS = [{"name": "epochs", "type": "int", "default": 3, "minimum": 1, "maximum": 50}]


def build(s: dict, values=None, overrides=None, display_name="job", labels=None):
    return jobspec.build(s, PARAMS, values or {}, overrides, display_name=display_name,
                         labels=labels or {}, reserved_labels={"trainjobs_job_id": "abc"})[1]


def envs(compiled) -> dict[str, dict]:
    return {r.task_name: compiled.env(r) for r in compiled.replicas}


def tf_config(compiled, task_name) -> dict:
    return json.loads(envs(compiled)[task_name]["TF_CONFIG"])


def cluster_spec(compiled, task_name) -> dict:
    return json.loads(envs(compiled)[task_name]["CLUSTER_SPEC"])
