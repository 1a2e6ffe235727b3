"""Issue 26, point 1: a template's model upload happens once a job SUCCEEDED, through the real
ModelServiceClient against the fake models endpoint; once per job across controller restarts
and lost answers; its outcome in the job's events and view; a failed upload leaves the job
SUCCEEDED."""
from __future__ import annotations

import pytest

from service.demo import demo_template
from tests.fakes.harness import (  # noqa: F401
    LOCATION,
    PROJECT,
    fake_logging,
    fake_vertex,
    make_harness,
)

BASE = "gs://runs-bucket/trainjobs"
SERVE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"


@pytest.fixture
def uploading(make_harness):
    """make(**settings): a harness whose service writes under BASE, with the `serve` template."""
    posted = []

    def make(**over):
        over.setdefault("vertex_base_output_directory", BASE)
        over.setdefault("vertex_model_upload_retry_seconds", 0.0)
        cm = make_harness(**over)
        h = cm.__enter__()
        if not posted:
            t = demo_template().model_dump(mode="json", exclude_none=True)
            t["name"] = "serve"
            t["spec"]["model_upload"] = {"display_name": "mnist-cnn", "serving_container_image_uri": SERVE,
                                         "labels": {"team": "vision"}}
            r = h.client.post("/v1/templates", json=t)
            assert r.status_code == 201, r.text
            posted.append(True)
        return cm, h
    opened = []

    def opener(**over):
        cm, h = make(**over)
        opened.append(cm)
        h.stop = lambda: (opened.remove(cm), cm.__exit__(None, None, None))
        return h
    yield opener
    for cm in reversed(opened):
        cm.__exit__(None, None, None)


def _succeed(h, fake, job_id):
    fake.set_state(job_id, "JOB_STATE_SUCCEEDED")
    h.reconcile()


def _events(h, job_id) -> list[str]:
    return [e["reason"] for e in h.events(job_id) if e["actor"] == "model-upload"]


def test_a_succeeded_job_uploads_its_model_once(uploading, fake_vertex):
    h = uploading()
    job = h.submit(template="serve")
    assert job["resources"]["model_upload"]["artifact_uri"] == f"{BASE}/{job['id']}/model/"
    assert "state" not in job["resources"]["model_upload"]       # planned, not yet due
    assert fake_vertex.models.calls["upload"] == 0
    _succeed(h, fake_vertex, job["id"])
    assert fake_vertex.models.calls["upload"] == 1
    body = fake_vertex.models.uploads[0]
    assert body["modelId"] == f"trainjobs-{job['id']}"
    model = body["model"]
    assert model["displayName"] == "mnist-cnn"
    assert model["artifactUri"] == f"{BASE}/{job['id']}/model/"
    assert model["containerSpec"]["imageUri"] == SERVE
    assert model["labels"] == {"team": "vision", "trainjobs_job_id": job["id"]}
    view = h.job(job["id"])
    assert view["state"] == "SUCCEEDED"
    upload = view["resources"]["model_upload"]
    assert upload["state"] == "succeeded"
    assert upload["model"] == f"{PARENT}/models/trainjobs-{job['id']}"
    assert upload["console_url"] == (f"https://console.cloud.google.com/vertex-ai/models/locations/{LOCATION}"
                                     f"/models/trainjobs-{job['id']}?project={PROJECT}")
    [reason] = _events(h, job["id"])
    assert "model uploaded" in reason and upload["model"] in reason
    for _ in range(3):   # later passes upload nothing more
        h.reconcile()
    assert fake_vertex.models.calls["upload"] == 1 and len(fake_vertex.models.models) == 1


def test_a_lost_answer_is_looked_up_after_a_restart_never_uploaded_twice(uploading, fake_vertex):
    h = uploading()
    job = h.submit(template="serve")
    fake_vertex.models.fail("upload", 503, "The service is currently unavailable.", apply=True)
    _succeed(h, fake_vertex, job["id"])
    assert fake_vertex.models.calls["upload"] == 1 and len(fake_vertex.models.models) == 1
    assert h.job(job["id"])["resources"]["model_upload"]["state"] == "uploading"
    # The controller stops; another (a new process: nothing in memory) takes over.
    h.stop()
    h2 = uploading()
    h2.reconcile()
    assert fake_vertex.models.calls["list"] == 1           # looked up by its label ...
    assert fake_vertex.models.calls["upload"] == 1         # ... and found: no second upload
    upload = h2.job(job["id"])["resources"]["model_upload"]
    assert upload["state"] == "succeeded" and upload["model"].endswith(f"/trainjobs-{job['id']}")
    assert len(_events(h2, job["id"])) == 1
    assert len(fake_vertex.models.models) == 1


def test_a_model_id_already_taken_is_that_model(uploading, fake_vertex):
    # The lookup missed it (e.g. labels not yet visible): Google refuses the id, 409; that is our model.
    h = uploading()
    job = h.submit(template="serve")
    name = f"{PARENT}/models/trainjobs-{job['id']}"
    fake_vertex.models.models[name] = {"name": name, "displayName": "x"}
    _succeed(h, fake_vertex, job["id"])
    assert h.job(job["id"])["resources"]["model_upload"]["model"] == name
    assert len(fake_vertex.models.models) == 1


def test_a_refused_upload_is_recorded_and_the_job_stays_succeeded(uploading, fake_vertex):
    h = uploading()
    job = h.submit(template="serve")
    fake_vertex.models.fail("upload", 400, "serving image not found")
    _succeed(h, fake_vertex, job["id"])
    view = h.job(job["id"])
    assert view["state"] == "SUCCEEDED"
    upload = view["resources"]["model_upload"]
    assert upload["state"] == "failed" and "serving image not found" in upload["message"]
    [reason] = _events(h, job["id"])
    assert "model upload failed" in reason and "stays SUCCEEDED" in reason
    h.reconcile()
    assert fake_vertex.models.calls["upload"] == 1


def test_transient_failures_give_up_after_the_setting(uploading, fake_vertex):
    h = uploading(vertex_model_upload_max_attempts=2)
    job = h.submit(template="serve")
    fake_vertex.models.fail("upload", 503, "unavailable", times=5)
    _succeed(h, fake_vertex, job["id"])             # attempt 1
    h.reconcile()                                    # lookup (none), attempt 2
    assert h.job(job["id"])["resources"]["model_upload"]["state"] == "uploading"
    h.reconcile()                                    # lookup (none), gives up
    upload = h.job(job["id"])["resources"]["model_upload"]
    assert upload["state"] == "failed" and "TRAINJOBS_VERTEX_MODEL_UPLOAD_MAX_ATTEMPTS" in upload["message"]
    assert fake_vertex.models.calls["upload"] == 2 and h.job(job["id"])["state"] == "SUCCEEDED"


def test_uploads_per_pass_are_capped(uploading, fake_vertex):
    h = uploading(vertex_model_uploads_per_pass=1)
    jobs = [h.submit(template="serve") for _ in range(2)]
    for j in jobs:
        fake_vertex.set_state(j["id"], "JOB_STATE_SUCCEEDED")
    h.reconcile()
    assert fake_vertex.models.calls["upload"] == 1
    h.reconcile()
    assert fake_vertex.models.calls["upload"] == 2


def test_a_failed_job_uploads_nothing(uploading, fake_vertex):
    h = uploading()
    job = h.submit(template="serve")
    fake_vertex.set_state(job["id"], "JOB_STATE_FAILED", error=(3, "bad flag"))
    h.reconcile()
    h.reconcile()
    assert fake_vertex.models.calls["upload"] == 0
    assert "state" not in h.job(job["id"])["resources"]["model_upload"]


def test_no_output_directory_is_a_422_at_submit(make_harness, fake_vertex):
    with make_harness() as h:
        r = h.client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": {
            "model_upload": {"serving_container_image_uri": SERVE}}})
        assert r.status_code == 422, r.text
        assert "model_upload" in r.text and "output directory" in r.text
        r = h.client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": {
            "model_upload": {"serving_container_image_uri": SERVE, "labels": {"trainjobs_job_id": "x"}},
            "base_output_directory": "gs://b/p"}})
        assert r.status_code == 422 and "model_upload.labels" in r.text
