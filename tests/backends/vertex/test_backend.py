"""The vertex backend end to end: POST /v1/jobs on the real app, the real
JobServiceClient over REST, the fake JobService on 127.0.0.1, the reconciler
driven by hand."""
from __future__ import annotations

import json
import re

import pytest

from service.backends.vertex import VertexConfigError
from tests.fakes.harness import (  # noqa: F401 - fixtures
    LOCATION,
    PROJECT,
    fake_logging,
    fake_vertex,
    harness,
    make_harness,
    vertex_settings,
)

CONSOLE = re.compile(rf"^https://console\.cloud\.google\.com/vertex-ai/locations/{LOCATION}/training/"
                     rf"(\d+)/cpu\?project={PROJECT}$")


def only_custom_job(fake, job_id) -> dict:
    jobs = fake.find(job_id)
    assert len(jobs) == 1, f"expected exactly one CustomJob for {job_id}, found {len(jobs)}"
    return jobs[0]


def test_submitted_job_runs_to_success(harness):
    job = harness.submit()
    cj = only_custom_job(harness.fake, job["id"])
    assert job["backend"] == "vertex" and job["state"] == "QUEUED"
    assert job["backend_ref"] == cj["name"]
    m = CONSOLE.match(job["console_url"])
    assert m and m.group(1) == cj["name"].rsplit("/", 1)[1]
    # What reached Google is the compiled CustomJob: chief + one worker, our label.
    assert cj["labels"]["trainjobs_job_id"] == job["id"]
    assert cj["labels"]["app"] == "trainjobs-demo"
    pools = cj["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "1"]
    assert pools[0]["containerSpec"]["imageUri"] == "trainjobs-trainer:latest"
    assert harness.fake.alt_params == {"json;enum-encoding=int"}

    harness.reconcile()
    assert harness.job(job["id"])["state"] == "PENDING"
    harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    harness.reconcile()
    running = harness.job(job["id"])
    assert running["state"] == "RUNNING"
    assert running["started_at"].startswith(harness.fake.get(job["id"])["startTime"][:19])
    harness.fake.set_state(job["id"], "JOB_STATE_SUCCEEDED")
    harness.reconcile()
    done = harness.job(job["id"])
    assert done["state"] == "SUCCEEDED" and done["error"] is None
    assert done["ended_at"].startswith(harness.fake.get(job["id"])["endTime"][:19])
    assert [(e["from_state"], e["to_state"]) for e in harness.events(job["id"])] == [
        (None, "QUEUED"), ("QUEUED", "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "SUCCEEDED")]
    # Followed by lists only: never one get per job.
    assert harness.fake.calls["get"] == 0


def test_scripted_job_runs_then_fails_with_googles_message(harness):
    job = harness.submit()
    message = "The replica workerpool1-0 exited with a non-zero status of 1. Termination reason: Error."
    harness.fake.script(job["id"], ["JOB_STATE_RUNNING", ("JOB_STATE_FAILED", (3, message))])
    harness.fake.advance()
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "RUNNING"
    harness.fake.advance()
    harness.reconcile()
    failed = harness.job(job["id"])
    assert failed["state"] == "FAILED"
    assert failed["error"]["code"] == 3 and failed["error"]["status"] == "INVALID_ARGUMENT"
    assert failed["error"]["message"] == message
    assert message in harness.events(job["id"])[-1]["reason"]


def test_cancel_goes_cancelling_then_cancelled_when_vertex_says_so(harness):
    job = harness.submit()
    harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    harness.reconcile()
    r = harness.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 202, r.text
    assert r.json()["state"] == "CANCELLING"
    assert harness.fake.calls["cancel"] == 0  # a request never calls Google: the controller does
    harness.reconcile()
    assert harness.fake.calls["cancel"] == 1
    assert harness.fake.get(job["id"])["state"] == "JOB_STATE_CANCELLING"
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "CANCELLING"
    assert harness.fake.calls["cancel"] == 1  # Vertex is on it: not sent again
    harness.fake.complete_cancels()
    harness.reconcile()
    cancelled = harness.job(job["id"])
    assert cancelled["state"] == "CANCELLED"
    assert cancelled["error"]["code"] == 1 and cancelled["error"]["message"] == "CANCELED"


def test_cancel_that_failed_transiently_is_sent_again_by_poll(make_harness, fake_vertex):
    with make_harness(vertex_retry_deadline_seconds=0.2) as harness:
        job = harness.submit()
        harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
        harness.fake.fail("cancel", 503, times=1000)
        r = harness.client.post(f"/v1/jobs/{job['id']}/cancel")
        assert r.status_code == 202 and r.json()["state"] == "CANCELLING"
        harness.reconcile()
        assert harness.fake.get(job["id"])["state"] == "JOB_STATE_RUNNING"
        harness.fake.clear_faults()
        harness.reconcile()
        assert harness.fake.get(job["id"])["state"] == "JOB_STATE_CANCELLING"
        assert harness.job(job["id"])["state"] == "CANCELLING"


def test_cancel_refused_for_good_does_not_stop_other_jobs(harness):
    job = harness.submit()
    other = harness.submit()
    for j in (job, other):
        harness.fake.set_state(j["id"], "JOB_STATE_RUNNING")
    harness.reconcile()
    harness.fake.fail("cancel", 403, "Permission 'aiplatform.customJobs.cancel' denied", times=1000)
    r = harness.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING"
    harness.reconcile()
    assert harness.fake.calls["cancel"] >= 1
    assert harness.job(job["id"])["state"] == "CANCELLING"
    # The refusal stops nothing else: the other job still moves, and this one ends as Vertex ends it.
    harness.fake.set_state(other["id"], "JOB_STATE_SUCCEEDED")
    harness.reconcile()
    assert harness.job(other["id"])["state"] == "SUCCEEDED"
    harness.fake.set_state(job["id"], "JOB_STATE_FAILED", error=(13, "replica crashed"))
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "FAILED"


class ProcessDied(BaseException):
    """Stands for the controller process dying inside backend.submit (nothing catches it)."""


def test_crash_after_create_is_adopted_not_duplicated(make_harness, fake_vertex, monkeypatch):
    with make_harness() as first:
        backend = first.backend
        real_submit = backend.submit

        def create_then_die(handle):
            real_submit(handle)    # Google creates the CustomJob...
            raise ProcessDied()    # ...and we never hear back

        monkeypatch.setattr(backend, "submit", create_then_die)
        job = first.submit(launch=False)
        with pytest.raises(ProcessDied):
            first.reconcile()
        assert first.job(job["id"])["state"] == "QUEUED" and first.job(job["id"])["backend_ref"] is None
        cj = only_custom_job(fake_vertex, job["id"])

    with make_harness() as second:  # a fresh controller: no memory of the submit
        second.reconcile()
        adopted = second.job(job["id"])
        assert adopted["backend_ref"] == cj["name"]
        assert CONSOLE.match(adopted["console_url"])
        second.reconcile()
        assert second.job(job["id"])["state"] == "PENDING"
        second.reconcile()
        only_custom_job(fake_vertex, job["id"])
        assert fake_vertex.calls["create"] == 1


def test_crash_before_create_is_submitted_once_after_the_grace(make_harness, fake_vertex, monkeypatch):
    with make_harness() as first:
        monkeypatch.setattr(first.backend, "submit", lambda handle: (_ for _ in ()).throw(ProcessDied()))
        job = first.submit(launch=False)
        with pytest.raises(ProcessDied):
            first.reconcile()

    with make_harness() as young:  # within the grace the recorded attempt might still land
        young.reconcile()
        young.reconcile()
        assert fake_vertex.find(job["id"]) == [] and fake_vertex.calls["create"] == 0
        assert young.job(job["id"])["backend_ref"] is None
        assert fake_vertex.calls["list"] >= 2  # it looked for it, by label, each pass

    with make_harness(vertex_submit_grace_seconds=0) as later:
        later.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        assert later.job(job["id"])["backend_ref"] == cj["name"]
        later.reconcile()
        later.reconcile()
        only_custom_job(fake_vertex, job["id"])
        assert fake_vertex.calls["create"] == 1


def test_crash_then_job_ended_on_vertex_is_adopted_in_its_final_state(make_harness, fake_vertex, monkeypatch):
    with make_harness() as first:
        backend = first.backend
        real_submit = backend.submit
        monkeypatch.setattr(backend, "submit", lambda handle: (real_submit(handle), (_ for _ in ()).throw(
            ProcessDied())))
        job = first.submit(launch=False)
        with pytest.raises(ProcessDied):
            first.reconcile()
    fake_vertex.set_state(job["id"], "JOB_STATE_RUNNING")
    fake_vertex.set_state(job["id"], "JOB_STATE_SUCCEEDED")
    with make_harness() as second:
        second.reconcile()  # adopted by its label
        second.reconcile()  # and followed
        adopted = second.job(job["id"])
        assert adopted["state"] == "SUCCEEDED"
        assert adopted["backend_ref"] == only_custom_job(fake_vertex, job["id"])["name"]


def test_lost_create_answer_is_adopted_not_created_again(harness):
    harness.fake.fail("create", 503, apply=True)  # created, but the answer is a 503
    job = harness.submit()
    assert job["state"] == "QUEUED" and job["backend_ref"] is None
    harness.reconcile()  # the attempt may have landed: looked up, found, adopted
    cj = only_custom_job(harness.fake, job["id"])
    assert harness.job(job["id"])["backend_ref"] == cj["name"]
    assert harness.fake.calls["create"] == 1


def test_429_in_googles_generic_wording_is_retried_after_a_pause(harness, monkeypatch):
    """Google's wording for a rate limit mentions quota too; only structured details fail a job."""
    clock = harness.use_clock(monkeypatch)
    harness.fake.fail("create", 429, "Resource has been exhausted (e.g. check quota).", times=2)
    job = harness.submit()
    assert job["state"] == "QUEUED" and job["backend_ref"] is None and job["error"] is None
    assert "429" in job["waiting_reason"] or "TooManyRequests" in job["waiting_reason"]
    assert harness.row(job["id"]).launch_attempted_at is None  # a 429 created nothing: nothing to wait for
    harness.reconcile()  # every create pauses after a 429: no call
    assert harness.fake.calls["create"] == 1
    assert harness.job(job["id"])["waiting_reason"] == (
        "waiting for the Vertex AI create budget (paused after Vertex AI answered 429; "
        "TRAINJOBS_VERTEX_CREATE_PER_MINUTE)")
    clock.advance(2)  # the first pause
    harness.reconcile()
    assert harness.fake.calls["create"] == 2  # another 429: the pause doubles
    clock.advance(2)
    harness.reconcile()
    assert harness.fake.calls["create"] == 2
    clock.advance(2)
    harness.reconcile()
    assert harness.fake.calls["create"] == 3
    job = harness.job(job["id"])
    assert job["backend_ref"] == only_custom_job(harness.fake, job["id"])["name"]
    assert job["state"] == "QUEUED" and job["error"] is None and job["waiting_reason"] is None


def test_429_marked_as_a_rate_limit_is_retried(harness, monkeypatch):
    clock = harness.use_clock(monkeypatch)
    harness.fake.fail_rate_limit("create")
    job = harness.submit()
    assert job["state"] == "QUEUED" and job["error"] is None
    clock.advance(2)
    harness.reconcile()
    assert harness.job(job["id"])["backend_ref"] == only_custom_job(harness.fake, job["id"])["name"]


def test_transient_errors_leave_the_job_queued(make_harness, fake_vertex):
    with make_harness(vertex_submit_grace_seconds=0) as h:
        fake_vertex.fail("create", 500, times=1000)
        job = h.submit()
        assert job["state"] == "QUEUED" and job["backend_ref"] is None and job["error"] is None
        assert fake_vertex.find(job["id"]) == []
        h.reconcile()  # still failing: never a reason to fail the job
        assert h.job(job["id"])["state"] == "QUEUED"
        fake_vertex.clear_faults()
        h.reconcile()
        cj = only_custom_job(fake_vertex, job["id"])
        assert h.job(job["id"])["backend_ref"] == cj["name"]


def test_permission_denied_fails_the_job_with_googles_message(harness):
    harness.fake.fail("create", 403)
    job = harness.submit()
    google = "Permission 'aiplatform.customJobs.create' denied on resource"
    assert job["state"] == "FAILED"
    assert job["error"]["code"] == 403 and job["error"]["message"].startswith(google)
    assert google in harness.events(job["id"])[-1]["reason"]
    assert harness.fake.calls["create"] == 1  # a 403 is not retried
    assert harness.fake.find(job["id"]) == []


@pytest.mark.parametrize("reason", ["RESOURCE_QUOTA_EXCEEDED", None])
def test_exhausted_resource_quota_is_permanent(harness, reason):
    """ErrorInfo RESOURCE_QUOTA_EXCEEDED, or a QuotaFailure naming a training-resource metric."""
    harness.fake.fail_quota("create", "custom_model_training_nvidia_t4_gpus", reason=reason)
    job = harness.submit()
    assert job["state"] == "FAILED"
    assert "custom_model_training_nvidia_t4_gpus" in job["error"]["message"] and job["error"]["code"] == 429
    harness.reconcile()
    assert harness.fake.calls["create"] == 1


def test_poll_reads_lists_not_one_get_per_job(make_harness, fake_vertex):
    with make_harness(reconcile_batch_size=10, vertex_list_page_size=8) as h:
        jobs = [h.submit() for _ in range(25)]
        fake_vertex.reset_calls()
        for j in jobs[::2]:
            fake_vertex.set_state(j["id"], "JOB_STATE_RUNNING")
        h.reconcile()
        assert fake_vertex.calls["get"] == 0 and fake_vertex.calls["create"] == 0
        states = {j["id"]: h.job(j["id"])["state"] for j in jobs}
        assert all(states[j["id"]] == "RUNNING" for j in jobs[::2])
        assert all(states[j["id"]] == "PENDING" for j in jobs[1::2])
        # Every list is bounded by label, state and create time.
        for f in fake_vertex.list_filters():
            assert "labels.trainjobs_job_id:*" in f and "create_time>=" in f and "state!=" in f
        # Three batches, one listing for the pass: our running jobs created since the
        # oldest, in pages of 8 (8 + 8 + 8 + 1): 4 calls, not 25 gets.
        assert fake_vertex.calls["list"] == 4
        # A job that ended leaves the running list; one list of ended jobs finds it.
        fake_vertex.reset_calls()
        fake_vertex.set_state(jobs[0]["id"], "JOB_STATE_SUCCEEDED")
        h.reconcile()
        assert h.job(jobs[0]["id"])["state"] == "SUCCEEDED"
        assert fake_vertex.calls["get"] == 0
        assert fake_vertex.calls["list"] == 3 + 1  # 24 running in 3 pages, then the ended one
        assert all(h.job(j["id"])["state"] in ("RUNNING", "PENDING") for j in jobs[1:])


def test_without_passes_every_poll_lists_afresh(harness):
    """Outside a reconcile pass (no begin_pass) no listing is reused: nothing goes stale."""
    job = harness.submit()
    handle = harness.backend_handle(job["id"])
    harness.fake.reset_calls()
    assert harness.backend.poll([handle])[0].state.value == "PENDING"
    harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    assert harness.backend.poll([handle])[0].state.value == "RUNNING"
    assert harness.fake.calls["list"] == 2


def test_job_deleted_on_vertex_fails_with_a_clear_error(harness):
    job = harness.submit()
    harness.fake.set_state(job["id"], "JOB_STATE_FAILED", error=(13, "Internal error"))
    name = harness.fake.get(job["id"])["name"]
    harness.backend.client.delete_custom_job(name=name).result()
    harness.reconcile()
    gone = harness.job(job["id"])
    assert gone["state"] == "FAILED"
    assert gone["error"]["status"] == "NOT_FOUND" and name in gone["error"]["message"]


def test_default_output_directory_and_service_account_are_what_the_view_shows(make_harness, fake_vertex):
    sa = "trainer@test-project.iam.gserviceaccount.com"
    with make_harness(vertex_base_output_directory="gs://bucket/runs/", vertex_service_account=sa) as h:
        job = h.submit()  # the demo template sets no output directory: each job gets its own
        sent = only_custom_job(fake_vertex, job["id"])
        prefix = f"gs://bucket/runs/{job['id']}"
        assert sent["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": prefix}
        assert sent["jobSpec"]["serviceAccount"] == sa
        # The job view is what Vertex received, and what Vertex gives each replica from it.
        view = h.job(job["id"])
        assert view["custom_job"]["jobSpec"] == sent["jobSpec"]
        assert view["custom_job"]["labels"] == sent["labels"]
        assert [r["task_name"] for r in view["cluster"]] == ["workerpool0-0", "workerpool1-0"]
        for replica in view["cluster"]:
            env = replica["env"]
            assert env["AIP_MODEL_DIR"] == f"{prefix}/model/"
            assert env["AIP_CHECKPOINT_DIR"] == f"{prefix}/checkpoints/"
            assert env["AIP_TENSORBOARD_LOG_DIR"] == f"{prefix}/logs/"
            for name in ("TF_CONFIG", "CLUSTER_SPEC"):
                spec = json.loads(env[name])["job"]
                assert spec["base_output_directory"] == {"output_uri_prefix": prefix}
                assert spec["service_account"] == sa
        # A dry run shows the same, for the id it would have had.
        preview = h.client.post("/v1/jobs", params={"dry_run": "true"}, json={"template": "mwms-demo"}).json()
        pid = preview["labels"]["trainjobs_job_id"]
        assert preview["custom_job"]["jobSpec"]["baseOutputDirectory"] == {
            "outputUriPrefix": f"gs://bucket/runs/{pid}"}
        assert {r["env"]["AIP_CHECKPOINT_DIR"] for r in preview["cluster"]} == {f"gs://bucket/runs/{pid}/checkpoints/"}
        # A job's own directory wins, and is what its replicas get.
        kept = h.submit(overrides={"base_output_directory": "gs://team-bucket/exp1"})
        assert only_custom_job(fake_vertex, kept["id"])["jobSpec"]["baseOutputDirectory"] == {
            "outputUriPrefix": "gs://team-bucket/exp1"}
        assert {r["env"]["AIP_MODEL_DIR"] for r in h.job(kept["id"])["cluster"]} == {"gs://team-bucket/exp1/model/"}


def test_without_a_default_output_directory_replicas_get_no_aip_directories(harness):
    job = harness.submit()
    sent = only_custom_job(harness.fake, job["id"])
    assert "baseOutputDirectory" not in sent["jobSpec"]
    view = harness.job(job["id"])
    assert view["custom_job"]["jobSpec"] == sent["jobSpec"]
    assert all("AIP_MODEL_DIR" not in r["env"] for r in view["cluster"])


def test_local_output_directory_is_refused_before_anything_is_stored(harness):
    r = harness.client.post("/v1/jobs", json={"template": "mwms-demo",
                                              "overrides": {"base_output_directory": "/tmp/out"}})
    assert r.status_code == 422, r.text
    assert "base_output_directory" in [e["field"] for e in r.json()["errors"]]
    assert harness.fake.calls["create"] == 0
    assert harness.client.get("/v1/jobs").json()["items"] == []


@pytest.mark.parametrize("over, needle", [
    ({"vertex_project": None}, "TRAINJOBS_VERTEX_PROJECT"),
    ({"vertex_location": "moon"}, "TRAINJOBS_VERTEX_LOCATION"),
    ({"vertex_api_endpoint": "ftp://127.0.0.1:1"}, "TRAINJOBS_VERTEX_API_ENDPOINT"),
    ({"vertex_base_output_directory": "/data/out"}, "TRAINJOBS_VERTEX_BASE_OUTPUT_DIRECTORY"),
    ({"vertex_submit_grace_seconds": 1}, "TRAINJOBS_VERTEX_SUBMIT_GRACE_SECONDS"),
])
def test_misconfiguration_fails_at_start_up(api_client, db_url, fake_vertex, fake_logging, over, needle):
    settings = vertex_settings(db_url, fake_vertex, fake_logging, **over)
    with pytest.raises(VertexConfigError, match=needle):
        with api_client(settings):
            pass
    assert fake_vertex.total_calls == 0


def test_cancel_of_a_job_that_just_ended_on_vertex_reports_how_it_ended(harness):
    job = harness.submit()
    harness.fake.set_state(job["id"], "JOB_STATE_RUNNING")
    harness.reconcile()
    harness.fake.set_state(job["id"], "JOB_STATE_SUCCEEDED")  # ends before our cancel arrives
    r = harness.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING"
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "SUCCEEDED"


def test_cancel_of_a_job_that_never_reached_vertex_ends_cancelled_without_a_create(make_harness, fake_vertex):
    with make_harness(vertex_submit_grace_seconds=60) as h:
        fake_vertex.fail("create", 503, times=1000)
        job = h.submit()
        assert job["backend_ref"] is None
        fake_vertex.clear_faults()
        r = h.client.post(f"/v1/jobs/{job['id']}/cancel")
        # Not final at once: the failed create may still land; until the grace has passed
        # each pass looks for it (and would cancel what landed).
        assert r.status_code == 202 and r.json()["state"] == "CANCELLING"
        h.reconcile()
        assert h.job(job["id"])["state"] == "CANCELLING"
    with make_harness(vertex_submit_grace_seconds=0) as h:
        h.reconcile()
        assert fake_vertex.find(job["id"]) == [] and fake_vertex.calls["create"] == 1
        assert h.job(job["id"])["state"] == "CANCELLED"


def test_cancel_while_queued_never_calls_google(harness):
    job = harness.submit(launch=False)
    harness.client.post(f"/v1/jobs/{job['id']}/cancel")
    harness.reconcile()
    assert harness.job(job["id"])["state"] == "CANCELLED"
    assert harness.fake.calls["create"] == 0 and harness.fake.calls["cancel"] == 0


