"""The compiler writes the CustomJob's JSON itself (no proto-plus on the submit path).
For many generated specs, that JSON must be exactly what the client library's types
print for the same job (tests/jobspec/proto_reference.py builds it the old way), and it
must round-trip through aiplatform_v1.CustomJob.from_json / to_json unchanged."""
import json

from google.cloud import aiplatform_v1 as v1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from service.jobspec.compile import compile_spec
from service.jobspec.machines import ACCELERATORS
from service.jobspec.spec import JobSpec
from tests.jobspec import proto_reference

TO_JSON = dict(use_integers_for_enums=False, always_print_fields_with_no_presence=False, indent=None)

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
env_name = st.from_regex(r"^[A-Za-z_][A-Za-z0-9_]{0,8}$", fullmatch=True)
strings = st.lists(text, max_size=4)
machines = st.sampled_from(["n1-standard-4", "n1-highmem-8", "a2-highgpu-1g", "g2-standard-8", "e2-standard-4"])
disk = st.fixed_dictionaries({}, optional={"boot_disk_type": st.sampled_from(["pd-ssd", "pd-standard"]),
                                           "boot_disk_size_gb": st.integers(10, 65536)})
override = st.fixed_dictionaries({}, optional={
    "image_uri": st.none() | text.filter(bool), "command": st.none() | strings, "args": st.none() | strings,
    "env": st.dictionaries(env_name, text, max_size=3)})
role = st.fixed_dictionaries({}, optional={
    "machine_type": machines, "accelerator_type": st.none() | st.just("") | st.sampled_from(ACCELERATORS),
    "accelerator_count": st.integers(0, 16), "replica_count": st.integers(1, 4), "disk": disk,
    "container": st.none() | override})
seconds = st.none() | st.integers(1, 7 * 24 * 3600)
spec_dicts = st.fixed_dictionaries(
    {"container": st.fixed_dictionaries({"image_uri": text.filter(bool)}, optional={
        "command": strings, "args": strings, "env": st.dictionaries(env_name, text, max_size=4)})},
    optional={
        "distribution": st.sampled_from(["multi_worker_mirrored", "parameter_server"]),
        "chief": role, "workers": st.none() | role, "parameter_servers": st.none() | role,
        "evaluator": st.none() | role,
        "reduction_server": st.none() | st.fixed_dictionaries({}, optional={
            "machine_type": machines, "replica_count": st.integers(1, 3), "image_uri": text.filter(bool),
            "disk": disk}),
        "base_output_directory": st.none() | text,
        "scheduling": st.fixed_dictionaries({}, optional={
            "timeout_seconds": seconds, "restart_job_on_worker_restart": st.booleans(),
            "strategy": st.sampled_from(["STANDARD", "SPOT", "FLEX_START", "ON_DEMAND", "LOW_COST"]), "disable_retries": st.booleans(),
            "max_wait_duration_seconds": seconds, "stall_timeout_seconds": seconds}),
        "service_account": st.none() | text,
        "network": st.none() | st.from_regex(r"^projects/[0-9]{1,5}/global/networks/[a-z-]{1,8}$", fullmatch=True),
        "enable_web_access": st.booleans(),
        "persistent_resource_id": st.none() | st.from_regex(r"^[a-z][a-z0-9-]{0,10}$", fullmatch=True),
        "tensorboard": st.none() | st.from_regex(r"^projects/[a-z0-9-]{1,8}/locations/[a-z0-9-]{1,8}/tensorboards/"
                                                 r"[0-9]{1,6}$", fullmatch=True),
    })
labels = st.dictionaries(st.from_regex(r"^[a-z][a-z0-9_-]{0,10}$", fullmatch=True),
                         st.from_regex(r"^[a-z0-9_-]{0,10}$", fullmatch=True), max_size=5)


@given(raw=spec_dicts, display_name=text.filter(bool), job_labels=labels)
@settings(max_examples=400, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_direct_json_is_what_the_client_types_print_and_round_trips(raw, display_name, job_labels):
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError:
        return  # e.g. a generated field past its bound: not a spec anyone can submit
    compiled = compile_spec(spec, display_name=display_name, labels=job_labels)
    reference = proto_reference.custom_job(spec, display_name=display_name, labels=job_labels)

    assert compiled.custom_job_dict == proto_reference.custom_job_dict(reference)
    assert compiled.job_spec_dict == proto_reference.job_spec_dict(reference)
    # The strings themselves hold the same (what is stored and what the vertex backend parses).
    assert json.loads(compiled.custom_job_json) == compiled.custom_job_dict
    assert json.loads(compiled.job_spec_json) == compiled.job_spec_dict
    # Unchanged through the client types, both ways.
    again = v1.CustomJob.to_json(v1.CustomJob.from_json(compiled.custom_job_json), **TO_JSON)
    assert json.loads(again) == compiled.custom_job_dict
    spec_again = v1.CustomJobSpec.to_json(v1.CustomJobSpec.from_json(compiled.job_spec_json),
                                          preserving_proto_field_name=True, **TO_JSON)
    assert json.loads(spec_again) == compiled.job_spec_dict
    assert compiled.custom_job() == reference


def test_every_accelerator_the_validator_accepts_is_a_client_enum_name():
    # The direct JSON writes accelerator_type by name; a name the client library does not
    # know would only fail when the controller submits.
    assert set(ACCELERATORS) <= set(v1.AcceleratorType.__members__)


def test_a_fully_populated_spec_matches_the_reference():
    spec = JobSpec.model_validate({
        "distribution": "multi_worker_mirrored",
        "container": {"image_uri": "img:1", "command": ["python", "-m", "x"], "args": ["--a", ""],
                      "env": {"A": "1", "EMPTY": ""}},
        "chief": {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_TESLA_A100",
                  "accelerator_count": 1, "disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 250}},
        "workers": {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_TESLA_A100",
                    "accelerator_count": 1, "replica_count": 3,
                    "container": {"image_uri": "img:2", "command": [], "env": {"B": "2"}}},
        "reduction_server": {"replica_count": 2},
        "evaluator": {"machine_type": "n1-standard-8"},
        "base_output_directory": "gs://b/run",
        "scheduling": {"timeout_seconds": 7200, "restart_job_on_worker_restart": True, "strategy": "SPOT",
                       "disable_retries": True, "max_wait_duration_seconds": 600},
        "service_account": "sa@p.iam.gserviceaccount.com", "network": "projects/1/global/networks/n",
        "enable_web_access": True, "persistent_resource_id": "warm-1",
        "tensorboard": "projects/p/locations/us-central1/tensorboards/12"})
    compiled = compile_spec(spec, display_name="ünïcode job", labels={"team": "v", "empty": ""})
    reference = proto_reference.custom_job(spec, display_name="ünïcode job", labels={"team": "v", "empty": ""})
    assert compiled.custom_job_dict == proto_reference.custom_job_dict(reference)
    assert compiled.job_spec_dict == proto_reference.job_spec_dict(reference)
    pools = compiled.custom_job_dict["jobSpec"]["workerPoolSpecs"]
    assert pools[1]["replicaCount"] == "3" and "command" not in pools[1]["containerSpec"]
    assert {"name": "EMPTY"} in pools[0]["containerSpec"]["env"]
    assert compiled.custom_job_dict["jobSpec"]["scheduling"]["timeout"] == "7200s"
    assert compiled.custom_job_dict["jobSpec"]["persistentResourceId"] == "warm-1"
    assert compiled.custom_job_dict["jobSpec"]["tensorboard"].endswith("/tensorboards/12")
