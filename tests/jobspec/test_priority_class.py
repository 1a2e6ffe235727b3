"""A job's priority class is the template's unless its overrides name another, and a sweep's
trials are compiled from the sweep's template and overrides like any job: they inherit it
(service/capacity/placement.py then turns the class into the job's priority at submit)."""
from __future__ import annotations

import uuid

import pytest

from service import jobspec
from service.core.errors import Invalid
from service.jobspec.trial import Trial
from tests.apikit import DEMO


def _build(spec: dict, overrides=None, trial=None) -> jobspec.CompiledJob:
    prepared = jobspec.prepare(spec, DEMO["parameters"])
    _spec, compiled = jobspec.build_from(prepared, {}, overrides, display_name="p", labels={}, trial=trial)
    return compiled


def test_the_class_is_the_templates_and_a_sweeps_trials_inherit_it():
    spec = {**DEMO["spec"], "priority_class": "batch"}
    assert _build(spec).priority_class == "batch"
    trial = _build(spec, trial=Trial(uuid.uuid4(), 3))
    assert trial.priority_class == "batch"
    assert jobspec.CompiledJob.from_json(trial.to_json()).priority_class == "batch"   # as stored
    assert '"priority_class":"batch"' in trial.to_json_text()
    assert _build(spec, {"priority_class": "urgent"}, Trial(uuid.uuid4(), 1)).priority_class == "urgent"
    assert _build(DEMO["spec"]).priority_class is None


@pytest.mark.parametrize("name", ["Urgent", "a b", "x" * 64, ""])
def test_a_class_name_is_checked(name):
    with pytest.raises(Invalid):
        _build({**DEMO["spec"], "priority_class": name})
