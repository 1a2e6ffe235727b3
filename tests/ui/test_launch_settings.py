"""The launch form's cluster fields: which settings a template grants, and how what
they change combines with the advanced JSON overrides."""
from __future__ import annotations

from service.ui.launch_settings import combine, fields, read


def test_only_granted_settings_of_present_roles_are_fields():
    spec = {"chief": {"machine_type": "n1-standard-4"}, "workers": {"replica_count": 2},
            "overridable": ["workers", "chief.replica_count", "evaluator.machine_type", "container"]}
    got = [(f.role, f.key, f.value) for f in fields(spec, ["n1-standard-8"], ["NVIDIA_L4"])]
    # "workers" grants all four of its settings; a chief has no count; no evaluator in this spec.
    assert got == [("workers", "replica_count", "2"), ("workers", "machine_type", "n1-standard-4"),
                   ("workers", "accelerator_type", ""), ("workers", "accelerator_count", "0")]


def test_only_what_differs_from_the_template_is_patched():
    spec = {"workers": {"replica_count": 2, "machine_type": "n1-standard-8"}, "overridable": ["workers"]}
    settings = fields(spec, ["n1-standard-16"], ["NVIDIA_L4"])
    patch = read(settings, {"set.workers.replica_count": "2", "set.workers.machine_type": "n1-standard-16",
                            "set.workers.accelerator_type": "NVIDIA_L4", "set.workers.accelerator_count": "1"})
    assert patch == {"workers": {"machine_type": "n1-standard-16", "accelerator_type": "NVIDIA_L4",
                                 "accelerator_count": 1}}
    assert read(settings, {"set.workers.replica_count": "2", "set.workers.machine_type": "n1-standard-8",
                           "set.workers.accelerator_type": "", "set.workers.accelerator_count": "0"}) == {}
    bad = read(settings, {"set.workers.replica_count": "0", "set.workers.machine_type": "not-listed",
                          "set.workers.accelerator_type": "", "set.workers.accelerator_count": "x"})
    assert bad is None
    # Worded as the service words a parameter's bounds (issue 37: one wording on the whole form).
    assert [f.error for f in settings] == ["0 is below the minimum 1 — use a value between 1 and 1000",
                                           "pick one of the list", None, "a whole number, e.g. 2"]


def test_machine_types_sort_by_their_numbers_and_the_timeout_is_a_field():
    spec = {"workers": {"replica_count": 1}, "overridable": ["workers.machine_type", "scheduling.timeout_seconds"]}
    settings = fields(spec, ["n1-standard-16", "n1-standard-4", "n1-standard-8", "n1-highmem-2"], [])
    assert settings[0].choices == ["n1-highmem-2", "n1-standard-4", "n1-standard-8", "n1-standard-16"]
    assert [(f.role, f.key, f.value) for f in settings][1:] == [("scheduling", "timeout_seconds", "")]
    assert read(settings, {"set.workers.machine_type": "n1-standard-4", "set.scheduling.timeout_seconds": ""}) == {}
    assert read(settings, {"set.workers.machine_type": "n1-standard-4", "set.scheduling.timeout_seconds": "7200"}
                ) == {"scheduling": {"timeout_seconds": 7200}}
    assert read(settings, {"set.workers.machine_type": "n1-standard-4",
                           "set.scheduling.timeout_seconds": "999999"}) is None
    assert settings[1].error == "999999 is above the maximum 604800 — use a value between 1 and 604800"


def test_the_advanced_json_applies_over_the_fields_and_keeps_its_nulls():
    fields_patch = {"workers": {"replica_count": 3, "machine_type": "n1-standard-8"}}
    assert combine(fields_patch, {"workers": {"machine_type": "n1-standard-16"}, "evaluator": None}) == \
        {"workers": {"replica_count": 3, "machine_type": "n1-standard-16"}, "evaluator": None}
    assert combine(fields_patch, None) == fields_patch
    assert combine({}, None) is None
    assert combine(fields_patch, [1]) == [1]  # not an object: the service says so, beside the JSON
