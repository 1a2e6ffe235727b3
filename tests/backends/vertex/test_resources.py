"""Issue 26, point 1: a template may name a persistent resource, a TensorBoard instance and an
experiment with a run-name pattern. Each is checked at submit (format, region), sent in the
CustomJob (through the real client, to the strict fake), shown in the job view with console
links, and changed by a member only where the template's `overridable` says."""
from __future__ import annotations

import pytest

from service.demo import demo_template
from tests.conftest import bearer, make_token
from tests.fakes.harness import (  # noqa: F401
    LOCATION,
    PROJECT,
    fake_logging,
    fake_vertex,
    make_harness,
)

TB = f"projects/{PROJECT}/locations/{LOCATION}/tensorboards/4242"


def _template(name: str, **spec) -> dict:
    t = demo_template().model_dump(mode="json", exclude_none=True)
    t["name"] = name
    t["spec"].update(spec)
    return t


def _post_template(h, t: dict):
    r = h.client.post("/v1/templates", json=t)
    assert r.status_code == 201, r.text


WARM = dict(persistent_resource_id="warm-pool-1", tensorboard=TB, experiment="mnist-sweeps",
            experiment_run="run-{job_id}")


def test_the_four_fields_reach_vertex_and_the_view(make_harness, fake_vertex):
    with make_harness() as h:
        _post_template(h, _template("warm", **WARM))
        job = h.submit(template="warm")
        sent = fake_vertex.get(job["id"])["jobSpec"]
        store = f"projects/{PROJECT}/locations/{LOCATION}/metadataStores/default/contexts"
        assert sent["persistentResourceId"] == "warm-pool-1"
        assert sent["tensorboard"] == TB
        assert sent["experiment"] == f"{store}/mnist-sweeps"
        assert sent["experimentRun"] == f"{store}/mnist-sweeps-run-{job['id']}"
        # The view shows what was sent, with console links into the job's project and region.
        res = job["resources"]
        assert res["tensorboard"]["name"] == TB
        assert "/tensorboard-instances/4242" in res["tensorboard"]["console_url"]
        assert res["experiment"]["console_url"].endswith(f"/experiments/mnist-sweeps/runs?project={PROJECT}")
        assert res["experiment_run"]["name"] == sent["experimentRun"]
        assert f"/locations/{LOCATION}/persistent-resources/warm-pool-1" in res["persistent_resource"]["console_url"]
        assert job["custom_job"]["jobSpec"]["experimentRun"] == sent["experimentRun"]


def test_a_run_name_takes_parameters(make_harness, fake_vertex):
    with make_harness() as h:
        t = _template("runs", experiment="lr-sweep", experiment_run="lr-${learning_rate_tag}-{job_id}")
        t["parameters"] = [*t.get("parameters", []), {"name": "learning_rate_tag", "type": "string",
                                                        "default": "small"}]
        _post_template(h, t)
        job = h.submit(template="runs", parameters={"learning_rate_tag": "big"})
        assert fake_vertex.get(job["id"])["jobSpec"]["experimentRun"].endswith(f"/lr-sweep-lr-big-{job['id']}")
        # A value Vertex cannot take in a run name is a 422 naming the field, before anything is sent.
        r = h.client.post("/v1/jobs", json={"template": "runs", "parameters": {"learning_rate_tag": "Big_1.0"}})
        assert r.status_code == 422, r.text
        assert "experiment_run" in r.text and "lowercase" in r.text


@pytest.mark.parametrize("field,value,words", [
    ("tensorboard", "projects/test-project/locations/europe-west4/tensorboards/1", "europe-west4"),
    ("tensorboard", "tensorboards/1", "tensorboard"),
    ("tensorboard", f"{TB}/experiments/x", "tensorboard"),
    ("experiment", "projects/test-project/locations/asia-east1/metadataStores/default/contexts/e1", "asia-east1"),
    ("experiment", "Mixed_Case", "experiment"),
    ("persistent_resource_id", "projects/p/locations/l/persistentResources/x", "persistent_resource_id"),
    ("persistent_resource_id", "9starts-with-digit", "persistent_resource_id"),
    ("experiment_run", "run-{job_id}", "experiment"),   # a run without its experiment
])
def test_bad_names_and_other_regions_are_a_clear_422(make_harness, fake_vertex, field, value, words):
    with make_harness() as h:
        r = h.client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": {field: value}})
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert words in r.text
        assert fake_vertex.calls["create"] == 0


def test_members_change_them_only_where_overridable_says(make_harness, fake_vertex, db_url):
    with make_harness() as h:
        _post_template(h, _template("warm-open", **WARM, overridable=["experiment_run"]))
        member = bearer(make_token(db_url, "alpha", "member", name="member-1"))
        other_tb = f"projects/{PROJECT}/locations/{LOCATION}/tensorboards/999"
        for change in ({"tensorboard": other_tb}, {"persistent_resource_id": "someone-elses"},
                       {"experiment": "elsewhere"}, {"tensorboard": None}):
            r = h.client.post("/v1/jobs", json={"template": "warm-open", "overrides": change}, headers=member)
            assert r.status_code == 403, (change, r.text)
            assert next(iter(change)) in r.text
        r = h.client.post("/v1/jobs", json={"template": "warm-open", "overrides": {"experiment_run": "mine-{job_id}"}},
                          headers=member)
        assert r.status_code == 201, r.text
        assert fake_vertex.calls["create"] == 0   # not launched yet: one pass does it
        h.reconcile()
        assert fake_vertex.get(r.json()["id"])["jobSpec"]["experimentRun"].endswith(f"-mine-{r.json()['id']}")


def test_a_grant_of_model_upload_does_not_cover_its_serving_image(make_harness, db_url):
    with make_harness() as h:
        upload = {"serving_container_image_uri": "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"}
        _post_template(h, _template("models-open", model_upload=upload, overridable=["model_upload"],
                                    base_output_directory="gs://b/runs"))
        member = bearer(make_token(db_url, "alpha", "member", name="member-2"))
        r = h.client.post("/v1/jobs?dry_run=true", json={"template": "models-open", "overrides": {
            "model_upload": {"serving_container_image_uri": "evil.example/serve:latest"}}}, headers=member)
        assert r.status_code == 403, r.text
        assert "serving_container_image_uri" in r.text
        r = h.client.post("/v1/jobs?dry_run=true", json={"template": "models-open", "overrides": {
            "model_upload": {"display_name": "mine"}}}, headers=member)
        assert r.status_code == 200, r.text
        assert r.json()["resources"]["model_upload"]["display_name"] == "mine"


def test_the_template_itself_is_checked_when_stored(make_harness):
    with make_harness() as h:
        r = h.client.post("/v1/templates", json=_template("bad", experiment_run="x-{job_id}"))
        assert r.status_code == 422, r.text
        assert "experiment_run" in r.text
        r = h.client.post("/v1/templates", json=_template("bad2", tensorboard="not/a/name"))
        assert r.status_code == 422 and "tensorboard" in r.text


def test_a_full_experiment_name_keeps_its_metadata_store(make_harness, fake_vertex):
    store = f"projects/{PROJECT}/locations/{LOCATION}/metadataStores/team-store/contexts"
    with make_harness() as h:
        job = h.submit(overrides={"experiment": f"{store}/exp1", "experiment_run": "{job_id}"})
        sent = fake_vertex.get(job["id"])["jobSpec"]
        assert sent["experiment"] == f"{store}/exp1"
        assert sent["experimentRun"] == f"{store}/exp1-{job['id']}"
