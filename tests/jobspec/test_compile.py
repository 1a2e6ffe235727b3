"""The compiler: pools in their fixed positions and the env every replica gets."""
import json

from google.cloud import aiplatform_v1 as v1

from tests.jobspec.helpers import IMAGE, build, cluster_spec, envs, spec, tf_config

GPU = {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2}


def pools(compiled) -> list[dict]:
    return compiled.custom_job_dict["jobSpec"]["workerPoolSpecs"]


def test_chief_only_is_one_pool_and_gets_no_tf_config():
    c = build(spec())
    assert len(pools(c)) == 1
    assert pools(c)[0]["replicaCount"] == "1"
    assert [r.task_name for r in c.replicas] == ["workerpool0-0"]
    env = envs(c)["workerpool0-0"]
    assert "TF_CONFIG" not in env  # Vertex sets TF_CONFIG only for distributed jobs
    assert cluster_spec(c, "workerpool0-0")["cluster"] == {"workerpool0": ["workerpool0-0:2222"]}


def test_chief_and_three_workers():
    c = build(spec(workers={"replica_count": 3}))
    assert [p["replicaCount"] for p in pools(c)] == ["1", "3"]
    cfg = tf_config(c, "workerpool1-2")
    assert cfg["cluster"] == {"chief": ["workerpool0-0:2222"],
                              "worker": ["workerpool1-0:2222", "workerpool1-1:2222", "workerpool1-2:2222"]}
    assert cfg["task"] == {"type": "worker", "index": 2}
    assert cfg["environment"] == "cloud"
    assert cfg["job"]["worker_pool_specs"][1]["replica_count"] == "3"
    assert tf_config(c, "workerpool0-0")["task"] == {"type": "chief", "index": 0}
    cs = cluster_spec(c, "workerpool1-2")
    assert cs["task"] == {"type": "workerpool1", "index": 2}
    assert list(cs["cluster"]) == ["workerpool0", "workerpool1"]


def test_chief_and_parameter_servers_leave_pool_one_empty():
    c = build(spec(distribution="parameter_server", parameter_servers={"replica_count": 2}))
    assert len(pools(c)) == 3
    assert pools(c)[1] == {}
    assert pools(c)[2]["replicaCount"] == "2"
    cfg = tf_config(c, "workerpool2-1")
    assert cfg["cluster"] == {"chief": ["workerpool0-0:2222"], "ps": ["workerpool2-0:2222", "workerpool2-1:2222"]}
    assert cfg["task"] == {"type": "ps", "index": 1}


def test_evaluator_is_pool_three_and_never_in_the_cluster():
    c = build(spec(workers={"replica_count": 2}, evaluator={"machine_type": "n1-standard-4"}))
    assert len(pools(c)) == 4 and pools(c)[2] == {}
    cfg = tf_config(c, "workerpool3-0")
    assert cfg["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in cfg["cluster"]
    assert "workerpool3-0:2222" not in json.dumps(cfg["cluster"])
    # ...but CLUSTER_SPEC lists every pool, the evaluator's too.
    assert cluster_spec(c, "workerpool3-0")["cluster"]["workerpool3"] == ["workerpool3-0:2222"]


def test_trailing_empty_pools_are_dropped():
    c = build(spec(workers={"replica_count": 1}))
    assert len(pools(c)) == 2  # no {} for pools 2 and 3


def test_reduction_server_takes_pool_two_without_gpus():
    c = build(spec(chief=GPU, workers={**GPU, "replica_count": 2},
                   reduction_server={"replica_count": 4, "client_installed": True}))
    rs = pools(c)[2]
    assert rs["replicaCount"] == "4"
    assert rs["machineSpec"] == {"machineType": "n1-highcpu-16"}
    assert rs["containerSpec"]["imageUri"].endswith("/reductionserver:latest")
    assert pools(c)[1]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_T4"
    reducer = next(r for r in c.replicas if r.pool == 2)
    assert reducer.tf_role is None
    assert "TF_CONFIG" not in envs(c)[reducer.task_name]  # reducers are not TensorFlow tasks
    assert set(tf_config(c, "workerpool1-0")["cluster"]) == {"chief", "worker"}


def test_legacy_master_naming_is_never_emitted():
    c = build(spec(workers={"replica_count": 2}, evaluator={}))
    for _task, env in envs(c).items():
        cfg = json.loads(env["TF_CONFIG"])
        assert "master" not in cfg["cluster"]
        assert cfg["task"]["type"] != "master"
    assert tf_config(c, "workerpool0-0")["task"]["type"] == "chief"


def test_custom_job_round_trips_through_the_client_types():
    c = build(spec(chief=GPU, workers={**GPU, "replica_count": 3},
                   reduction_server={"replica_count": 2, "client_installed": True},
                   evaluator={"machine_type": "n1-standard-4"},
                   base_output_directory="gs://bucket/run",
                   scheduling={"timeout_seconds": 7200, "strategy": "SPOT", "restart_job_on_worker_restart": True},
                   service_account="sa@proj.iam.gserviceaccount.com",
                   network="projects/123/global/networks/default", labels={"team": "vision"}))
    job = c.custom_job()
    assert isinstance(job, v1.CustomJob)
    again = v1.CustomJob.to_json(v1.CustomJob.from_json(c.custom_job_json), use_integers_for_enums=False,
                                 always_print_fields_with_no_presence=False, indent=None)
    assert json.loads(again) == c.custom_job_dict
    assert job.job_spec.scheduling.timeout.total_seconds() == 7200
    assert job.job_spec.scheduling.strategy == v1.Scheduling.Strategy.SPOT
    assert job.labels == {"team": "vision", "trainjobs_job_id": "abc"}
    # The wire form the REST client sends: enums as ints, int64 as strings.
    wire = json.loads(v1.CustomJob.to_json(job))
    assert wire["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == 5
    assert wire["jobSpec"]["workerPoolSpecs"][1]["replicaCount"] == "3"


def test_output_directory_sets_the_aip_dirs_on_every_replica():
    c = build(spec(workers={"replica_count": 1}, base_output_directory="gs://b/runs/x/"))
    for env in envs(c).values():
        assert env["AIP_MODEL_DIR"] == "gs://b/runs/x/model/"
        assert env["AIP_CHECKPOINT_DIR"] == "gs://b/runs/x/checkpoints/"
        assert env["AIP_TENSORBOARD_LOG_DIR"] == "gs://b/runs/x/logs/"


def test_parameters_and_role_containers_are_rendered():
    c = build(spec(workers={"replica_count": 1, "container": {"args": ["--role=w", "--e=${epochs}"],
                                                              "env": {"EXTRA": "1"}}},
                   container={"image_uri": IMAGE, "args": ["--epochs=${epochs}", "--lit=$${epochs}"],
                              "env": {"E": "${epochs}"}}), values={"epochs": 7})
    chief, worker = c.replicas
    assert chief.args == ("--epochs=7", "--lit=${epochs}")
    assert worker.args == ("--role=w", "--e=7")
    assert envs(c)["workerpool1-0"]["E"] == "7" and envs(c)["workerpool1-0"]["EXTRA"] == "1"
    assert "EXTRA" not in envs(c)["workerpool0-0"]


def test_backends_can_render_their_own_addresses_and_output_dir():
    c = build(spec(workers={"replica_count": 1}, base_output_directory="gs://b/x"))
    addrs = {"workerpool0-0": "127.0.0.1:5000", "workerpool1-0": "127.0.0.1:5001"}
    env = c.env(c.replicas[1], addrs, "/tmp/run/output")
    assert json.loads(env["TF_CONFIG"])["cluster"] == {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001"]}
    assert env["AIP_MODEL_DIR"] == "/tmp/run/output/model/"


def test_compiled_job_survives_storage_as_json():
    from service.jobspec import CompiledJob
    c = build(spec(workers={"replica_count": 2}, evaluator={}))
    again = CompiledJob.from_json(json.loads(json.dumps(c.to_json())))
    assert again.custom_job_dict == c.custom_job_dict
    assert [again.env(r) for r in again.replicas] == [c.env(r) for r in c.replicas]


def test_replicas_of_gpu_pools_are_told_how_many_gpus_to_expect():
    c = build(spec(chief=GPU, workers={**GPU, "accelerator_count": 4, "replica_count": 2},
                   evaluator={"machine_type": "n1-standard-4"}))
    by_task = envs(c)
    assert by_task["workerpool0-0"]["TRAINJOBS_EXPECTED_GPUS"] == "2"
    assert by_task["workerpool1-0"]["TRAINJOBS_EXPECTED_GPUS"] == "4"
    assert by_task["workerpool1-1"]["TRAINJOBS_EXPECTED_GPUS"] == "4"
    assert "TRAINJOBS_EXPECTED_GPUS" not in by_task["workerpool3-0"]  # a CPU pool: nothing to check
    # On Vertex it travels in the pool's container env.
    env = {e["name"]: e["value"] for e in pools(c)[1]["containerSpec"]["env"]}
    assert env["TRAINJOBS_EXPECTED_GPUS"] == "4"
    assert "env" not in pools(c)[3]["containerSpec"]
