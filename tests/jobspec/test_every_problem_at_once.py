"""One build reports every independent problem (issue 25): parameters, the overrides'
shape, the merged spec's schema and its rules together; a check that needs what another
found broken says it was not run, instead of disappearing."""
from __future__ import annotations

import pytest

from service import jobspec
from service.core.errors import Invalid
from tests.jobspec.helpers import PARAMS, build, spec


def problems(**kw) -> list[tuple[str, str]]:
    with pytest.raises(Invalid) as e:
        build(spec(workers={"replica_count": 1}), **kw)
    return [(p.field, p.message) for p in e.value.problems]


def fields(found: list[tuple[str, str]]) -> list[str]:
    return [f for f, _ in found]


def test_a_broken_worker_count_no_longer_hides_the_chief_count_nor_the_parameters():
    found = problems(values={"epochs": 0}, overrides={
        "chief": {"replica_count": 2}, "workers": {"replica_count": 0, "machine_type": "n9-giant-7"},
        "scheduling": {"timeout_seconds": -1}})
    f = fields(found)
    # the schema's problems (merged spec), the parameters', then the rules'
    assert f[:2] == ["spec.workers.replica_count", "spec.scheduling.timeout_seconds"]
    assert "parameters.epochs" in f and "spec.chief.replica_count" in f and "spec.workers.machine_type" in f
    assert len(f) == 5, found   # nothing "not checked": no rule reads what is broken


def test_each_pool_is_checked_on_its_own():
    found = problems(overrides={"chief": {"replica_count": 3, "machine_type": "n1-standard-3"},
                                "workers": {"replica_count": 0, "accelerator_type": "NVIDIA_TESLA_T4"},
                                "evaluator": {"replica_count": 2, "machine_type": "e2-standard-4",
                                              "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}})
    f = fields(found)
    assert f == ["spec.workers.replica_count", "spec.chief.replica_count", "spec.evaluator.replica_count",
                 "spec.chief.machine_type", "spec.workers.accelerator_count", "spec.evaluator.accelerator_type"]


def test_overrides_that_are_not_an_object_still_let_the_parameters_and_name_be_checked():
    found = problems(values={"epochs": "lots"}, overrides=[{"op": "replace"}], display_name=" ")
    assert fields(found) == ["overrides", "spec", "parameters.epochs", "display_name"]
    # the merged spec could not be built: said so, not dropped
    assert "not checked" in found[1][1] and "overrides" in found[1][1]


def test_a_rule_that_reads_another_broken_field_says_it_waits():
    found = problems(overrides={"distribution": "ring_allreduce", "parameter_servers": {"replica_count": 1}})
    assert ("spec.distribution" in fields(found)
            and ("spec.parameter_servers", "the strategy's pools not checked: distribution must be valid first")
            in found)


def test_a_run_name_made_of_parameters_waits_for_them():
    s = spec(experiment="exp", experiment_run="run-${epochs}")
    with pytest.raises(Invalid) as e:
        jobspec.build(s, PARAMS, {"epochs": 999}, None, display_name="job", labels={})
    found = [(p.field, p.message) for p in e.value.problems]
    assert found[0][0] == "parameters.epochs"
    assert ("spec.experiment_run", "the experiment run's name not checked: parameters must be valid first") in found
    # and with sound values it is checked, and passes
    assert jobspec.build(s, PARAMS, {"epochs": 9}, None, display_name="job", labels={})[1]


def test_a_missing_container_still_lets_the_pools_be_checked():
    found = problems(overrides={"container": None, "chief": {"replica_count": 2}})
    assert fields(found) == ["spec.container", "spec.chief.replica_count"]


def test_a_spec_that_is_sound_builds_as_before():
    assert [r.task_name for r in build(spec(workers={"replica_count": 2})).replicas] == \
        ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
