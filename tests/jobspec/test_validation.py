"""Everything wrong with a spec is refused before launch, naming the field and the fix."""
import pytest

from service import jobspec
from service.core.errors import Invalid
from tests.jobspec.helpers import PARAMS, build, spec


def problems(exc: Invalid) -> dict[str, str]:
    return {p.field: p.message for p in exc.problems}


def refused(s, **kw) -> dict[str, str]:
    with pytest.raises(Invalid) as e:
        build(s, **kw)
    assert all(p.field and p.message for p in e.value.problems)
    return problems(e.value)


def test_chief_must_have_one_replica():
    p = refused(spec(chief={"replica_count": 2}))
    assert "exactly 1 replica" in p["spec.chief.replica_count"]


def test_at_most_one_evaluator():
    assert "at most one evaluator" in refused(spec(evaluator={"replica_count": 2}))["spec.evaluator.replica_count"]


def test_parameter_servers_need_the_parameter_server_strategy():
    p = refused(spec(workers={}, parameter_servers={"replica_count": 1}))
    assert "parameter-server strategy" in p["spec.parameter_servers"]


def test_reduction_server_needs_gpu_workers():
    p = refused(spec(workers={"replica_count": 2}, reduction_server={"replica_count": 1, "client_installed": True}))
    assert "GPU workers" in p["spec.reduction_server"]


GPU = {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2}


def test_reduction_server_needs_images_that_declare_the_reduction_client():
    s = spec(chief=GPU, workers={**GPU, "replica_count": 2}, reduction_server={"replica_count": 1})
    p = refused(s)
    assert list(p) == ["spec.reduction_server.client_installed"]
    message = p["spec.reduction_server.client_installed"]
    assert "google-reduction-server" in message and "the reducer pool idles" in message
    assert "packaged trainer image does not include it" in message
    s["reduction_server"]["client_installed"] = True
    build(s)


def test_the_expected_gpu_variable_is_the_services_to_set():
    # TRAINJOBS_* names are reserved (env_policy); the compiler sets this one from accelerator_count.
    s = spec(chief={**GPU, "container": {"env": {"TRAINJOBS_EXPECTED_GPUS": "0"}}})
    s["container"]["env"] = {"TRAINJOBS_EXPECTED_GPUS": "8"}
    p = refused(s)
    assert {"spec.container.env.TRAINJOBS_EXPECTED_GPUS", "spec.chief.container.env.TRAINJOBS_EXPECTED_GPUS"} <= set(p)


@pytest.mark.parametrize("machine,accel,count,field,words", [
    ("n1-standard-8", "NVIDIA_TESLA_T4", 3, "accelerator_count", "counts [1, 2, 4]"),
    ("n1-standard-32", "NVIDIA_TESLA_T4", 1, "accelerator_count", "counts [2, 4]"),
    ("n1-standard-16", "NVIDIA_TESLA_V100", 1, "accelerator_count", "counts [2, 4, 8]"),
    ("n1-standard-8", "NVIDIA_TESLA_A100", 1, "accelerator_type", "does not attach"),
    ("a2-highgpu-2g", "NVIDIA_TESLA_A100", 1, "accelerator_type", "exactly 2 x NVIDIA_TESLA_A100"),
    ("g2-standard-24", "NVIDIA_L4", 1, "accelerator_type", "exactly 2 x NVIDIA_L4"),
    ("a3-highgpu-8g", None, 0, "accelerator_type", "exactly 8 x NVIDIA_H100_80GB"),
    ("e2-standard-4", "NVIDIA_TESLA_T4", 1, "accelerator_type", "takes no accelerators"),
    ("n1-standard-4", "NVIDIA_TESLA_T4", 0, "accelerator_count", "needs a count"),
    ("n1-standard-4", "TPU_NONSENSE", 1, "accelerator_type", "unknown accelerator"),
    ("z9-mega-1", None, 0, "machine_type", "unknown machine type"),
])
def test_machine_and_accelerator_table(machine, accel, count, field, words):
    role = {"machine_type": machine, "accelerator_type": accel, "accelerator_count": count}
    p = refused(spec(workers=role))
    assert words in p[f"spec.workers.{field}"]


@pytest.mark.parametrize("machine,accel,count", [
    ("n1-standard-8", "NVIDIA_TESLA_T4", 2), ("n1-standard-8", "NVIDIA_TESLA_T4", 4),
    ("n1-highmem-96", "NVIDIA_TESLA_V100", 8), ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 4),
    ("a2-ultragpu-1g", "NVIDIA_A100_80GB", 1), ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
    ("g2-standard-96", "NVIDIA_L4", 8), ("e2-standard-8", None, 0),
])
def test_good_pairings_pass(machine, accel, count):
    build(spec(workers={"machine_type": machine, "accelerator_type": accel, "accelerator_count": count}))


@pytest.mark.parametrize("labels,field", [
    ({"Team": "x"}, "labels.Team"), ({"1abc": "x"}, "labels.1abc"), ({"team": "Vision"}, "labels.team"),
    ({"k" * 65: "x"}, "labels." + "k" * 65), ({"team": "v" * 65}, "labels.team"),
    ({"team": "a b"}, "labels.team"), ({"_team": "x"}, "labels._team"), ({"Équipe": "x"}, "labels.Équipe"),
    ({"trainjobs-job-id": "x"}, "labels.trainjobs-job-id"), ({"trainjobs_run": "x"}, "labels.trainjobs_run"),
])
def test_labels_in_googles_format(labels, field):
    assert field in refused(spec(), labels=labels)


def test_labels_google_allows_pass():
    # CustomJob.labels: up to 64 Unicode codepoints, lowercase letters (international ones
    # too), digits, _ and -; keys start with a letter; values may be empty.
    labels = {"k" * 64: "v" * 64, "équipe": "données", "日本語": "値", "ß-2_x": "", "team": "٣"}
    job = build(spec(), labels=labels)
    assert {k: job.custom_job_dict["labels"][k] for k in labels} == labels


def test_display_name_at_most_128():
    assert "at most 128" in refused(spec(), display_name="x" * 129)["display_name"]


def test_unknown_and_out_of_bounds_parameters():
    p = refused(spec(), values={"epochs": 500, "epohcs": 1})
    assert "above the maximum 50" in p["parameters.epochs"]
    assert p["parameters.epohcs"] == "unknown parameter"
    assert "expected int" in refused(spec(), values={"epochs": "3"})["parameters.epochs"]
    assert "expected int" in refused(spec(), values={"epochs": True})["parameters.epochs"]


def test_malformed_merge_patch():
    assert "JSON object" in refused(spec(), overrides=[{"op": "replace"}])["overrides"]
    p = refused(spec(), overrides={"workers": {"replica_count": "many"}})
    assert "spec.workers.replica_count" in p
    assert refused(spec(), overrides={"wokers": {}})["spec.wokers"] == "unknown field"


def test_overrides_can_remove_and_change_roles():
    c = build(spec(workers={"replica_count": 2}, evaluator={}), overrides={"evaluator": None,
                                                                         "workers": {"replica_count": 5}})
    assert [r.task_name for r in c.replicas][-1] == "workerpool1-4"
    assert all(r.tf_role != "evaluator" for r in c.replicas)


def test_undeclared_parameter_reference():
    p = refused(spec(container={"image_uri": "i", "args": ["--x=${nope}"]}))
    assert "undeclared parameter ${nope}" in p["spec.container.args[0]"]


def test_all_problems_are_reported_at_once():
    with pytest.raises(Invalid) as e:
        build(spec(chief={"replica_count": 3}, evaluator={"replica_count": 2}))
    assert len(e.value.problems) == 2


def test_template_checks_parameter_declarations():
    with pytest.raises(Invalid) as e:
        jobspec.check_template(spec(), PARAMS + [
            {"name": "epochs", "type": "int"},
            {"name": "lr", "type": "float", "minimum": 1, "maximum": 0.1},
            {"name": "mode", "type": "string", "default": 3}])
    fields = problems(e.value)
    assert "declared twice" in fields["parameters[1].name"]
    assert "above maximum" in fields["parameters[2]"]
    assert "expected string" in fields["parameters[3].default"]
