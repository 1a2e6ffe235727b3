"""The compiler's part: a trial's id in every TensorFlow replica's env, TF_CONFIG and
CLUSTER_SPEC `task.trial` as Vertex's tuning sets it, and the labels; nothing for a plain job."""
from __future__ import annotations

import json
import uuid

from service import jobspec
from tests.jobspec.helpers import PARAMS, build, envs, spec

SWEEP = uuid.UUID(int=7)


def _trial_build(s: dict, number: int):
    return jobspec.build(s, PARAMS, {}, None, display_name="t", labels={"team": "x"},
                         reserved_labels={"trainjobs_job_id": "abc"}, trial=jobspec.Trial(SWEEP, number))[1]


def test_every_tf_replica_knows_its_trial():
    s = spec(workers={"replica_count": 2}, parameter_servers={"replica_count": 1},
             evaluator={"machine_type": "n1-standard-4"}, distribution="parameter_server")
    c = _trial_build(s, 3)
    for task, env in envs(c).items():
        assert env["CLOUD_ML_TRIAL_ID"] == "3", task
        assert json.loads(env["TF_CONFIG"])["task"]["trial"] == "3", task
        assert json.loads(env["CLUSTER_SPEC"])["task"]["trial"] == "3", task
    assert c.custom_job_dict["labels"] == {"team": "x", "trainjobs_job_id": "abc",
                                           "trainjobs_sweep_id": str(SWEEP), "trainjobs_trial": "3"}
    plain = build(s)
    for env in envs(plain).values():
        assert "CLOUD_ML_TRIAL_ID" not in env and "trial" not in json.loads(env["TF_CONFIG"])["task"]


def test_reduction_server_replicas_are_no_trial_of_tensorflow():
    gpu = {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1, "machine_type": "n1-standard-8"}
    s = spec(chief=gpu, workers={**gpu, "replica_count": 2},
             reduction_server={"replica_count": 2, "client_installed": True})
    c = _trial_build(s, 1)
    reducers = [r for r in c.replicas if r.tf_role is None]
    assert reducers and all("CLOUD_ML_TRIAL_ID" not in r.container_env for r in reducers)
    assert all(r.container_env["CLOUD_ML_TRIAL_ID"] == "1" for r in c.replicas if r.tf_role)
