"""A submit's compile and price, reused by the next submit of the same template version,
values and overrides (service/jobs/compile_reuse.py): every job it hands out is exactly
the one jobspec.build_from makes, and every error is build_from's."""
from __future__ import annotations

import copy
import uuid

import pytest

from service import jobspec
from service.core.errors import Invalid
from service.cost.estimate import Pricer
from service.cost.prices import load as load_prices
from service.jobs.compile_reuse import LARGEST_SHARE, CompileReuse
from service.jobspec.reserved import JOB_ID_LABEL
from service.jobspec.trial import Trial
from tests.apikit import DEMO

TEMPLATE = (uuid.uuid4(), 1)


def _rich_spec() -> dict:
    """Every part of a CompiledJob that is not the CustomJob's outer keys: spec labels, a
    retry policy, Vertex extras, an evaluator, env in a given order, a priority class."""
    spec = copy.deepcopy(DEMO["spec"])
    spec["container"]["env"] = {"ZED": "${epochs}", "ALPHA": "a"}
    spec["evaluator"] = {"machine_type": "n1-standard-8", "replica_count": 1}
    spec["retry"] = {"max_attempts": 3, "exit_codes": [42]}
    spec["experiment"] = "exp-one"
    spec["experiment_run"] = "run-${epochs}-{job_id}"
    spec["model_upload"] = {"serving_container_image_uri": "serve:1", "labels": {"m": "1"}}
    spec["priority_class"] = "batch"
    spec["base_output_directory"] = "gs://bucket/runs/${epochs}"
    spec["overridable"] = ["container.env", "workers", "labels"]
    return spec


PREPARED = {"demo": jobspec.prepare(DEMO["spec"], DEMO["parameters"]),
            "rich": jobspec.prepare(_rich_spec(), DEMO["parameters"])}


def _job(name_of=None, labels=None):
    job_id = uuid.uuid4()
    return dict(display_name=name_of(job_id) if name_of else f"mwms-demo-{job_id.hex[:8]}",
                labels=labels or {}, reserved_labels={JOB_ID_LABEL: str(job_id)})


def _fresh(prepared, values, overrides, **job):
    return jobspec.build_from(prepared, values, overrides, **job)[1]


def _problems(call) -> list:
    with pytest.raises(Invalid) as e:
        call()
    return [(p.field, p.message, p.fix) for p in e.value.problems]


@pytest.mark.parametrize("template", sorted(PREPARED))
@pytest.mark.parametrize("values,overrides", [
    ({}, None),
    ({"epochs": 3}, None),
    ({"epochs": 3, "learning_rate": 0.5}, None),
    ({"epochs": 3}, {"workers": {"replica_count": 3}, "labels": {"team-l": "x"}}),
    ({"epochs": 3}, {"container": {"env": {"B": "1", "A": "2"}}}),
    ({"epochs": 3}, {"container": {"env": {"A": "2", "B": "1"}}}),   # the same keys in another order
])
def test_a_reused_compile_is_the_fresh_one_for_every_job(template, values, overrides):
    reuse = CompileReuse(1 << 24)
    prepared = PREPARED[template]
    jobs = [_job(), _job(lambda i: "ünïcode \u2603 name"), _job(labels={"owner": "ana", "exp": "b"}),
            _job(labels={"app": "overridden"}), _job(lambda i: 'quote " and \\ backslash')]
    for job in jobs:
        built = reuse.build(TEMPLATE, prepared, values, overrides, **job)
        fresh = _fresh(prepared, values, overrides, **job)
        assert built.compiled == fresh                                     # every field
        assert built.compiled.custom_job_json == fresh.custom_job_json     # byte for byte
        assert built.compiled.to_json_text() == fresh.to_json_text()       # as stored
        assert built.compiled.custom_job_dict == fresh.custom_job_dict
    assert len(reuse) == 1   # one compile for all five jobs


def test_env_order_is_part_of_the_key():
    reuse = CompileReuse(1 << 24)
    prepared = PREPARED["rich"]
    first = reuse.build(TEMPLATE, prepared, {}, {"container": {"env": {"B": "1", "A": "2"}}}, **_job()).compiled
    second = reuse.build(TEMPLATE, prepared, {}, {"container": {"env": {"A": "2", "B": "1"}}}, **_job()).compiled
    names = [[e["name"] for e in pool["containerSpec"]["env"]] for pool in
             (first.custom_job_dict["jobSpec"]["workerPoolSpecs"][0], second.custom_job_dict["jobSpec"]["workerPoolSpecs"][0])]
    assert names[0] != names[1]
    assert len(reuse) == 2


def test_values_that_differ_only_in_type_are_not_the_same_entry():
    reuse = CompileReuse(1 << 24)
    prepared = PREPARED["demo"]
    for value in (1, 1.0, 1, 1.0):
        job = _job()
        assert reuse.build(TEMPLATE, prepared, {"learning_rate": value}, None, **job).compiled == \
            _fresh(prepared, {"learning_rate": value}, None, **job)
    assert len(reuse) == 2


def test_another_version_or_template_is_another_entry():
    reuse = CompileReuse(1 << 24)
    one = reuse.build(TEMPLATE, PREPARED["demo"], {}, None, **_job()).compiled
    other = reuse.build((TEMPLATE[0], 2), PREPARED["rich"], {}, None, **_job()).compiled
    third = reuse.build((uuid.uuid4(), 1), PREPARED["rich"], {}, None, **_job()).compiled
    assert len(reuse) == 3
    assert len(one.replicas) == 2 and len(other.replicas) == len(third.replicas) == 3


@pytest.mark.parametrize("job", [
    dict(display_name="x" * 129),
    dict(display_name="  "),
    dict(display_name="bell \x07"),
    dict(labels={"Bad Key": "v"}),
    dict(labels={JOB_ID_LABEL: "mine"}),                   # reserved
    dict(labels={f"k{i}": "v" for i in range(64)}),          # 64 with the spec's and the job id: too many
    dict(display_name="x" * 200, labels={"Bad": "v"}),        # both at once, in build_from's order
])
def test_a_hit_with_a_bad_name_or_labels_fails_as_build_from_does(job):
    reuse = CompileReuse(1 << 24)
    prepared = PREPARED["demo"]
    reuse.build(TEMPLATE, prepared, {"epochs": 3}, None, **_job())
    assert len(reuse) == 1
    bad = {**_job(), **job}
    expected = _problems(lambda: _fresh(prepared, {"epochs": 3}, None, **bad))
    assert expected
    assert _problems(lambda: reuse.build(TEMPLATE, prepared, {"epochs": 3}, None, **bad)) == expected


def test_nothing_with_a_problem_is_kept():
    reuse = CompileReuse(1 << 24)
    prepared = PREPARED["demo"]
    for values, job in [({"epochs": 0}, _job()), ({"nope": 1}, _job()), ({"epochs": 3}, _job(labels={"A": "b"}))]:
        assert _problems(lambda: reuse.build(TEMPLATE, prepared, values, None, **job)) == \
            _problems(lambda: _fresh(prepared, values, None, **job))
    assert len(reuse) == 0 and reuse.bytes == 0


def test_a_sweep_trial_is_never_reused():
    reuse = CompileReuse(1 << 24)
    trial = Trial(uuid.uuid4(), 1)
    built = reuse.build(TEMPLATE, PREPARED["demo"], {}, None, trial=trial, **_job())
    assert built.entry is None and len(reuse) == 0
    assert built.compiled == jobspec.build_from(PREPARED["demo"], {}, None, trial=trial,
                                                **{**_job(), "display_name": built.compiled.custom_job_dict["displayName"],
                                                   "reserved_labels": {JOB_ID_LABEL:
                                                                       built.compiled.custom_job_dict["labels"][JOB_ID_LABEL]}})[1]


def test_a_job_changed_by_a_reader_does_not_change_the_next():
    reuse = CompileReuse(1 << 24)
    prepared = PREPARED["rich"]
    first = reuse.build(TEMPLATE, prepared, {}, None, **_job()).compiled
    first.custom_job_dict["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] = "99"
    first.custom_job_dict["labels"]["app"] = "changed"
    first.retry["max_attempts"] = 99                        # type: ignore[index]
    first.vertex["model_upload"]["labels"]["m"] = "changed"  # type: ignore[index]
    job = _job()
    second = reuse.build(TEMPLATE, prepared, {}, None, **job).compiled
    assert second == _fresh(prepared, {}, None, **job)
    assert second.custom_job_dict["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"


def test_the_kept_json_is_bounded_in_bytes():
    prepared = PREPARED["demo"]
    one = CompileReuse(1 << 24)
    one.build(TEMPLATE, prepared, {"epochs": 1}, None, **_job())
    weight = one.bytes
    assert weight > 0
    reuse = CompileReuse(weight * LARGEST_SHARE + weight // 2)   # room for 10 of them, not 11
    for epochs in range(1, 31):
        reuse.build(TEMPLATE, prepared, {"epochs": epochs}, None, **_job())
        assert reuse.bytes <= reuse.max_bytes
    assert len(reuse) == LARGEST_SHARE
    # The least recently used went first: epochs 21..30 are kept; using 21 again keeps it.
    reuse.build(TEMPLATE, prepared, {"epochs": 21}, None, **_job())
    reuse.build(TEMPLATE, prepared, {"epochs": 31}, None, **_job())
    kept = {k[2] for k in reuse._items}
    assert len(kept) == LARGEST_SHARE
    assert reuse.build(TEMPLATE, prepared, {"epochs": 21}, None, **_job()).entry is not None
    # One job above a tenth of the budget is compiled but not kept; 0 keeps nothing.
    small = CompileReuse(weight * LARGEST_SHARE - 1)
    assert small.build(TEMPLATE, prepared, {}, None, **_job()).entry is None and len(small) == 0
    off = CompileReuse(0)
    assert off.build(TEMPLATE, prepared, {}, None, **_job()).entry is None and len(off) == 0


def test_the_price_is_made_once_per_backend_and_each_job_gets_its_own_copy():
    reuse = CompileReuse(1 << 24)
    pricer = Pricer(load_prices(None), "us-central1")
    calls = []

    def price(built, backend):
        def run():
            calls.append(backend)
            return pricer.estimate(built.compiled.custom_job_dict, backend)
        return run

    costs = []
    for backend in ("local", "local", "vertex", "local"):
        built = reuse.build(TEMPLATE, PREPARED["demo"], {}, None, **_job())
        costs.append(built.cost(backend, price(built, backend)))
    assert calls == ["local", "vertex"]
    assert costs[0] == costs[1] == costs[3] and costs[0] is not costs[1]
    assert costs[0].exact_per_hour == costs[1].exact_per_hour > 0
    costs[0].accrued = "set by one job's view"              # type: ignore[assignment]
    assert costs[1].accrued is None
    assert reuse.build(TEMPLATE, PREPARED["demo"], {}, None, **_job()).cost("local", lambda: 1 / 0).accrued is None


def test_the_setting_is_what_the_app_uses(api_client, settings, tokens, demo):
    for size, kept in ((0, 0), (1 << 20, 1)):
        with api_client(settings.model_copy(update={"compile_cache_bytes": size}), tokens["member"]) as c:
            jobs = [c.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 3}}).json()
                    for _ in range(3)]
            assert len(c.app.state.services.submitter.compile_reuse) == kept
            # Each its own id, name and job-id label; the rest the same.
            assert len({j["id"] for j in jobs}) == 3
            for j in jobs:
                assert j["custom_job"]["labels"][JOB_ID_LABEL] == j["id"]
                assert j["custom_job"]["displayName"] == j["display_name"] == f"mwms-demo-{j['id'].replace('-', '')[:8]}"
                assert j["cost"] == jobs[0]["cost"]
                assert j["custom_job"]["jobSpec"] == jobs[0]["custom_job"]["jobSpec"]


def test_values_that_are_not_json_are_compiled_and_never_kept(monkeypatch):
    # A caller's own types (not a request's JSON) have no text to key them by: compiled, never kept.
    from service.jobs import compile_reuse
    assert compile_reuse._digest({"epochs": object()}, None) is None
    assert compile_reuse._digest({"epochs": 3}, None) is not None
    deep: dict = {}
    for _ in range(5_000):   # deeper than json's encoder recurses (a RecursionError)
        deep = {"a": deep}
    assert compile_reuse._digest({}, deep) is None
    assert _problems(lambda: CompileReuse(1 << 24).build(TEMPLATE, PREPARED["demo"], {}, deep, **_job())) == \
        _problems(lambda: _fresh(PREPARED["demo"], {}, deep, **_job()))
    monkeypatch.setattr(compile_reuse, "_digest", lambda values, overrides: None)
    reuse = CompileReuse(1 << 24)
    job = _job()
    built = reuse.build(TEMPLATE, PREPARED["demo"], {"epochs": 3}, None, **job)
    assert built.entry is None and len(reuse) == 0
    assert built.compiled == _fresh(PREPARED["demo"], {"epochs": 3}, None, **job)
