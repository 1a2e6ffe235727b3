"""TF_CONFIG as Vertex AI and legacy AI Platform write it -> the replica's role."""

import json

import pytest

from tests.trainer.helpers import vertex_tf_config
from trainer.cluster import check_role, parse_tf_config
from trainer.errors import ConfigError

CLUSTER = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}


def test_no_tf_config_is_a_single_replica_chief():
    for text in (None, "", "  "):
        c = parse_tf_config(text)
        assert (c.task_type, c.task_index, c.cluster) == ("chief", 0, {})
        assert c.is_chief and not c.is_multi_worker and not c.is_evaluator
        assert c.task_name == "chief:0"
        check_role(c, "auto")


def test_vertex_chief_with_environment_job_and_trial():
    c = parse_tf_config(vertex_tf_config(CLUSTER, "chief", 0, trial="3"))
    assert c.task_name == "chief:0" and c.is_chief
    assert c.num_workers == 3 and c.is_multi_worker
    assert c.trial == "3"
    # TensorFlow gets only cluster and task: no "environment", "job" or "trial".
    assert json.loads(c.tf_config_json()) == {"cluster": CLUSTER, "task": {"type": "chief", "index": 0}}


def test_vertex_worker_is_not_chief():
    c = parse_tf_config(vertex_tf_config(CLUSTER, "worker", 1))
    assert c.task_name == "worker:1"
    assert not c.is_chief
    assert json.loads(c.tf_config_json())["task"] == {"type": "worker", "index": 1}


def test_legacy_master_is_read_as_chief():
    legacy = {"cluster": {"master": ["m:2222"], "worker": ["w:2222"]},
              "task": {"type": "master", "index": 0}, "environment": "cloud", "job": {"job_name": "x"}}
    c = parse_tf_config(json.dumps(legacy))
    assert c.task_type == "chief" and c.raw_task_type == "master" and c.is_chief
    assert json.loads(c.tf_config_json()) == {
        "cluster": {"chief": ["m:2222"], "worker": ["w:2222"]}, "task": {"type": "chief", "index": 0}}
    worker = parse_tf_config(json.dumps({**legacy, "task": {"type": "worker", "index": 0}}))
    assert not worker.is_chief  # a master exists, so worker 0 is not the chief


def test_worker_zero_is_chief_when_there_is_no_chief_pool():
    c = parse_tf_config(json.dumps({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}))
    assert c.is_chief
    c1 = parse_tf_config(json.dumps({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}))
    assert not c1.is_chief


def test_evaluator_is_outside_the_training_cluster():
    c = parse_tf_config(vertex_tf_config(CLUSTER, "evaluator", 0))
    assert c.is_evaluator and not c.is_chief
    assert c.task_name == "evaluator:0"
    check_role(c, "auto")
    # Even if some launcher lists the evaluator in the cluster, TensorFlow must not see it.
    listed = parse_tf_config(json.dumps({"cluster": {**CLUSTER, "evaluator": ["e:1"]},
                                         "task": {"type": "evaluator", "index": 0}}))
    assert "evaluator" not in listed.cluster


def test_ps_task_is_refused_unless_parameter_server_strategy():
    cluster = {**CLUSTER, "ps": ["10.0.0.9:2222"]}
    ps = parse_tf_config(vertex_tf_config(cluster, "ps", 0))
    for strategy in ("auto", "mwms", "mirrored", "default"):
        with pytest.raises(ConfigError, match=r"parameter server \(ps:0\).*--strategy=parameter_server"):
            check_role(ps, strategy)
    check_role(ps, "parameter_server")
    # The chief of such a cluster is refused too: MWMS cannot use a ps pool.
    chief = parse_tf_config(vertex_tf_config(cluster, "chief", 0))
    with pytest.raises(ConfigError, match="'ps' pool"):
        check_role(chief, "auto")
    check_role(chief, "parameter_server")


def test_parameter_server_strategy_needs_ps_and_chief():
    with pytest.raises(ConfigError, match="'ps' pool"):
        check_role(parse_tf_config(vertex_tf_config(CLUSTER, "chief", 0)), "parameter_server")
    no_chief = parse_tf_config(json.dumps({"cluster": {"worker": ["a:1"], "ps": ["p:1"]},
                                           "task": {"type": "worker", "index": 0}}))
    with pytest.raises(ConfigError, match="chief"):
        check_role(no_chief, "parameter_server")


def test_single_machine_strategies_refuse_a_multi_worker_cluster():
    c = parse_tf_config(vertex_tf_config(CLUSTER, "chief", 0))
    for strategy in ("mirrored", "default"):
        with pytest.raises(ConfigError, match="3 training replicas"):
            check_role(c, strategy)
    check_role(c, "mwms")


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 5}}), "worker:5 is not in the cluster"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "boss", "index": 0}}), "'boss'"),
    (json.dumps({"cluster": CLUSTER}), "no task.type"),
    (json.dumps({"cluster": {"chief": ["a:1"], "master": ["b:1"]}, "task": {"type": "chief"}}), "both"),
    (json.dumps({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief"}}), "more than one chief"),
    (json.dumps({"cluster": {"chief": "a:1"}, "task": {"type": "chief"}}), "list of host:port"),
])
def test_malformed_tf_config_is_a_config_error(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_tf_config(text)


# --- CLUSTER_SPEC, Reduction Server, peers -------------------------------------------

from tests.trainer.helpers import vertex_cluster_spec  # noqa: E402
from trainer.cluster import parse_environment  # noqa: E402

POOLS = {"workerpool0": ["h0:2222"], "workerpool1": ["h1:2222", "h2:2222"]}


def test_cluster_spec_alone_is_translated_into_the_tf_cluster():
    c = parse_environment({"CLUSTER_SPEC": vertex_cluster_spec(POOLS, "workerpool1", 1)})
    assert c.task_name == "worker:1" and not c.is_chief
    assert c.cluster == {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]}
    assert c.address == "h2:2222"
    chief = parse_environment({"CLUSTER_SPEC": vertex_cluster_spec(POOLS, "workerpool0", 0)})
    assert chief.is_chief and chief.num_workers == 3


def test_cluster_spec_evaluator_and_single_replica_trial():
    pools = {**POOLS, "workerpool3": ["e:2222"]}
    ev = parse_environment({"CLUSTER_SPEC": vertex_cluster_spec(pools, "workerpool3", 0)})
    assert ev.is_evaluator and "evaluator" not in ev.cluster
    # Vertex sets no TF_CONFIG for one replica; the trial id is only in CLUSTER_SPEC.
    single = parse_environment({"CLUSTER_SPEC": vertex_cluster_spec({"workerpool0": ["h:1"]}, "workerpool0", 0,
                                                                     trial="12")})
    assert single.task_name == "chief:0" and not single.is_multi_worker and single.trial == "12"
    # With both, TF_CONFIG decides the role; CLUSTER_SPEC still fills in a missing trial.
    both = parse_environment({"TF_CONFIG": vertex_tf_config(CLUSTER, "worker", 0),
                              "CLUSTER_SPEC": vertex_cluster_spec(POOLS, "workerpool1", 0, trial="3")})
    assert both.task_name == "worker:0" and both.trial == "3"


def test_cluster_spec_pool_two_needs_the_job_spec_to_tell_ps_from_reduction_server():
    pools = {**POOLS, "workerpool2": ["r:2222"]}
    doc = json.loads(vertex_cluster_spec(pools, "workerpool1", 0))
    ps = parse_environment({"CLUSTER_SPEC": json.dumps(doc)})
    assert ps.cluster["ps"] == ["r:2222"] and not ps.reduction_server

    doc["job"]["worker_pool_specs"][2]["container_spec"]["image_uri"] = (
        "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest")
    rs = parse_environment({"CLUSTER_SPEC": json.dumps(doc)})
    assert rs.reduction_server and "ps" not in rs.cluster
    assert rs.cluster == {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]}

    del doc["job"]
    with pytest.raises(ConfigError, match="cannot tell parameter servers from Reduction Server"):
        parse_environment({"CLUSTER_SPEC": json.dumps(doc)})


def test_reduction_server_is_read_from_tf_config_job_in_either_field_naming():
    camel = json.loads(vertex_tf_config(CLUSTER, "chief", 0))
    camel["job"]["workerPoolSpecs"].append({"containerSpec": {
        "imageUri": "europe-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"}})
    assert parse_environment({"TF_CONFIG": json.dumps(camel)}).reduction_server
    # Reducers listed as "ps" would make MWMS refuse the cluster: they are no TensorFlow tasks.
    camel["cluster"] = {**CLUSTER, "ps": ["r0:2222"]}
    listed = parse_environment({"TF_CONFIG": json.dumps(camel)})
    assert listed.reduction_server and "ps" not in listed.cluster
    check_role(listed, "auto")
    assert not parse_environment({"TF_CONFIG": vertex_tf_config(CLUSTER, "chief", 0)}).reduction_server


def test_peers_each_replica_waits_for():
    chief = parse_tf_config(vertex_tf_config(CLUSTER, "chief", 0))
    assert chief.peers_to_wait_for("mwms") == {"worker:0": "10.0.0.2:2222", "worker:1": "10.0.0.3:2222"}
    worker = parse_tf_config(vertex_tf_config(CLUSTER, "worker", 1))
    assert worker.peers_to_wait_for("mwms") == {"chief:0": "10.0.0.1:2222", "worker:0": "10.0.0.2:2222"}
    assert worker.address == "10.0.0.3:2222"
    ps_cluster = {**CLUSTER, "ps": ["10.0.0.9:2222"]}
    coordinator = parse_tf_config(vertex_tf_config(ps_cluster, "chief", 0))
    assert set(coordinator.peers_to_wait_for("parameter_server")) == {"worker:0", "worker:1", "ps:0"}
    assert parse_tf_config(vertex_tf_config(ps_cluster, "ps", 0)).peers_to_wait_for("parameter_server") == {}
    assert parse_tf_config(vertex_tf_config(CLUSTER, "evaluator", 0)).peers_to_wait_for("mwms") == {}
    assert parse_tf_config(None).peers_to_wait_for("default") == {}


def test_whether_the_job_has_an_evaluator():
    from trainer.callbacks import epoch_checkpoints_to_keep
    from trainer.config import parse_args

    with_eval = parse_tf_config(vertex_tf_config(CLUSTER, "chief", 0, evaluator=True))
    without = parse_tf_config(vertex_tf_config(CLUSTER, "chief", 0))
    unknown = parse_tf_config(json.dumps({"cluster": CLUSTER, "task": {"type": "chief", "index": 0}}))
    assert (with_eval.has_evaluator, without.has_evaluator, unknown.has_evaluator) == (True, False, None)
    spec = parse_environment({"CLUSTER_SPEC": vertex_cluster_spec({**POOLS, "workerpool3": ["e:1"]}, "workerpool0", 0)})
    assert spec.has_evaluator is True
    assert parse_environment({"CLUSTER_SPEC": vertex_cluster_spec(POOLS, "workerpool0", 0)}).has_evaluator is False
    # Per-epoch checkpoints are only for the evaluator: none when the job surely has none.
    auto = parse_args([], environ={})
    assert [epoch_checkpoints_to_keep(auto, c) for c in (with_eval, without, unknown)] == [2, 0, 2]
    assert epoch_checkpoints_to_keep(parse_args(["--keep-checkpoints=5"], environ={}), without) == 5
