"""How Slurm jobs end, each as it should: a failing replica, a cancel, a time limit, a
job cancelled outside trainjobs, a partition Slurm refuses."""
from __future__ import annotations

import pytest

from tests.backends.slurm.conftest import spec
from tests.conftest import ONE_DATABASE
from tests.waiting import wait_for

pytestmark = ONE_DATABASE


def _slurm_state(cluster, slurm_id: str) -> str:
    return cluster.run("squeue", "-h", "--states=all", "-j", slurm_id, "-o", "%T").split()[0]


def test_a_failing_replica_fails_the_job_and_stops_the_others(make_slurm_client, cluster, tmp_path):
    api = make_slurm_client()
    never = tmp_path / "never"   # the chief waits for good: only the worker's failure ends the job
    api.template("fail", spec(["--wait-file", str(never)], workers=["--exit", "3", "--lines", "2"]))
    job = api.submit("fail")
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED", "CANCELLED")
    assert done["state"] == "FAILED"
    err = done["error"]
    assert err["replica"] == "workerpool1-0" and err["exit_code"] == 3, err
    assert err["slurm_state"] == "FAILED" and err["slurm_job_id"] == done["backend_ref"]
    assert "worker-0 exiting with 3" in err["log_tail"]
    assert "exited with a non-zero status of 3" in err["message"]
    # The job view's per-replica status, from the worker's exit record (the CLI's EXIT column).
    worker = next(r["status"] for r in api.job(job["id"])["cluster"] if r["task_name"] == "workerpool1-0")
    assert worker["state"] == "FAILED" and worker["exit_code"] == 3 and worker["ended_at"], worker
    # The whole Slurm job ended: the waiting chief was stopped with it.
    wait_for(lambda: not cluster.jobs_active(), "no Slurm job left running", 60)
    assert _slurm_state(cluster, done["backend_ref"]) == "FAILED"


def test_cancel_stops_the_whole_slurm_job(make_slurm_client, cluster, tmp_path):
    api = make_slurm_client()
    never = tmp_path / "never"
    api.template("long", spec(["--wait-file", str(never)], workers=["--wait-file", str(never)]))
    job = api.submit("long")
    assert api.wait_state(job["id"], "RUNNING", "FAILED")["state"] == "RUNNING"
    r = api.c.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code in (200, 202), r.text
    done = api.wait_state(job["id"], "CANCELLED", "FAILED", "SUCCEEDED")
    assert done["state"] == "CANCELLED", done["error"]
    assert "by request" in api.events(job["id"])[-1]["reason"]
    assert _slurm_state(cluster, done["backend_ref"]) == "CANCELLED"
    wait_for(lambda: not cluster.jobs_active(), "no Slurm job left running", 60)


def test_a_job_cancelled_in_slurm_says_so(make_slurm_client, cluster, tmp_path):
    api = make_slurm_client()
    never = tmp_path / "never"
    api.template("long", spec(["--wait-file", str(never)]))
    job = api.submit("long")
    running = api.wait_state(job["id"], "RUNNING", "FAILED")
    cluster.run("scancel", running["backend_ref"])
    done = api.wait_state(job["id"], "CANCELLED", "FAILED")
    assert done["state"] == "CANCELLED", (done["error"], api.events(job["id"]))
    assert "outside trainjobs" in done["error"]["message"]


@pytest.mark.slow
def test_time_limit_ends_the_job_failed_with_timeout(make_slurm_client, cluster, tmp_path):
    """Slurm's shortest limit is a minute: scheduling.timeout_seconds=30 becomes --time=1."""
    api = make_slurm_client()
    never = tmp_path / "never"
    api.template("slow", spec(["--wait-file", str(never)], timeout_seconds=30))
    job = api.submit("slow")
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED", "CANCELLED", timeout=240)
    assert done["state"] == "FAILED"
    err = done["error"]
    assert err["slurm_state"] == "TIMEOUT" and err["code"] == 4, err
    assert "time limit of 1 min" in err["message"]


def test_a_partition_slurm_refuses_fails_the_job_with_slurms_words(make_slurm_client, cluster):
    api = make_slurm_client()
    api.template("nowhere", spec(["--lines", "1"], labels={"slurm-partition": "nosuch"}))
    job = api.submit("nowhere")
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert "invalid partition" in done["error"]["message"].lower(), done["error"]


def test_a_partition_account_or_qos_not_open_to_trainjobs_is_a_422(make_slurm_client, cluster):
    api = make_slurm_client(slurm_allowed_partitions=["debug"], slurm_allowed_accounts=["team-a"],
                            slurm_allowed_qos=["normal"])
    api.template("other", spec(["--lines", "1"], labels={"slurm-partition": "gpu"}))
    r = api.c.post("/v1/jobs", json={"template": "other", "backend": "slurm"})
    assert r.status_code == 422, r.text
    assert any(e["field"] == "labels.slurm-partition" for e in r.json()["errors"]), r.json()
    # A member's own job labels are held to the same lists.
    api.template("plain", spec(["--lines", "1"]))
    r = api.c.post("/v1/jobs", json={"template": "plain", "backend": "slurm",
                                     "labels": {"slurm-account": "team-b", "slurm-qos": "high"}})
    assert r.status_code == 422, r.text
    assert {e["field"] for e in r.json()["errors"]} == {"labels.slurm-account", "labels.slurm-qos"}, r.json()
    assert not cluster.jobs_active()


def test_a_lost_node_fails_the_job_as_lost_and_the_policy_retries_it(make_slurm_client, cluster, tmp_path):
    """An administrator downs the node a task runs on (as slurmctld does when a node stops
    answering): Slurm ends the job NODE_FAIL; a retry policy with on_signal retries it."""
    api = make_slurm_client()
    never = tmp_path / "never"
    template = spec(["--wait-file", str(never)], workers=["--wait-file", str(never)])
    template["retry"] = {"max_attempts": 2, "backoff": {"initial_seconds": 0}}
    api.template("lost", template)
    job = api.submit("lost")
    running = api.wait_state(job["id"], "RUNNING", "FAILED")
    assert running["state"] == "RUNNING", running["error"]
    try:
        cluster.run("scontrol", "update", "NodeName=n2", "State=DOWN", "Reason=trainjobs-test")
        done = api.wait_state(job["id"], "FAILED", "SUCCEEDED", "CANCELLED")
    finally:
        cluster.resume_node("n2")
    err = done["error"]
    assert err["slurm_state"] == "NODE_FAIL" and err["lost"] is True and err["code"] == 14, err
    assert wait_for(lambda: api.job(job["id"]).get("retried_by"), "a second attempt")


def test_reduction_server_is_a_422_on_slurm(make_slurm_client, cluster):
    api = make_slurm_client()
    gpu = {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}
    template = spec(["--lines", "1"], workers=["--lines", "1"], reduction_server={"client_installed": True})
    template["chief"].update(gpu)
    template["workers"].update(gpu)
    api.template("rs", template)
    r = api.c.post("/v1/jobs", json={"template": "rs", "backend": "slurm"})
    assert r.status_code == 422, r.text
    assert any(e["field"] == "reduction_server" for e in r.json()["errors"]), r.json()
    assert not cluster.jobs_active()


def test_a_launcher_that_cannot_start_fails_the_job_with_sruns_words(make_slurm_client, cluster):
    """A misconfigured node (TRAINJOBS_SLURM_PYTHON missing there): no task ever runs, so the
    error shows the batch script's output."""
    api = make_slurm_client(slurm_python="/nonexistent/python3")
    api.template("nopython", spec(["--lines", "1"], command=["/bin/true"]))
    job = api.submit("nopython")
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert done["state"] == "FAILED"
    assert "/nonexistent/python3" in done["error"]["message"], done["error"]
    assert done["error"]["batch_output_tail"]
