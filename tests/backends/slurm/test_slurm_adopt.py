"""Never two Slurm jobs for one attempt: a restarted controller follows what the
previous one submitted (found by the job's name in Slurm), and a submit whose earlier
sbatch may have landed looks it up instead of submitting again."""
from __future__ import annotations

import uuid

from service import jobspec
from service.backends.slurm import SlurmBackend
from service.backends.slurm.entry import slurm_config_of
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState
from service.persistence.models import utcnow
from tests.backends.slurm.conftest import SlurmApi, slurm_settings, spec
from tests.conftest import bearer


def _named(cluster, job_id: str) -> list[str]:
    return cluster.run("squeue", "-h", "--states=all", f"--name=trainjobs-{job_id}", "-o", "%i %T").splitlines()


def test_a_restarted_controller_follows_the_job_it_did_not_submit(api_client, db_url, cluster, slurm_work_dir, token, tmp_path):
    go = tmp_path / "go"
    settings = slurm_settings(db_url, cluster, slurm_work_dir)
    with api_client(settings, token) as client:
        api = SlurmApi(client)
        api.template("two", spec(["--wait-file", str(go)], workers=["--wait-file", str(go)]))
        job = api.submit("two")
        running = api.wait_state(job["id"], "RUNNING", "FAILED")
        assert running["state"] == "RUNNING", running["error"]
    # No controller now: the job runs on in Slurm, and ends while nobody follows it.
    assert len(_named(cluster, job["id"])) == 2     # one het job: two components, one id
    go.touch()
    with api_client(settings, token) as client:
        api = SlurmApi(client)
        done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
        assert done["state"] == "SUCCEEDED", done["error"]
        assert done["backend_ref"] == running["backend_ref"]
    ids = {line.split()[0].split("+")[0] for line in _named(cluster, job["id"])}
    assert ids == {running["backend_ref"]}            # never submitted again


def test_submit_adopts_what_an_earlier_attempt_submitted(db_url, cluster, slurm_work_dir, tmp_path):
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    backend.start_client()
    never = tmp_path / "never"
    _, compiled = jobspec.build(spec(["--wait-file", str(never)]), [], {}, None, display_name="t", labels={})
    job_id = uuid.uuid4()
    fresh = JobHandle(job_id, JobState.QUEUED, None, compiled, utcnow())
    first = backend.submit(fresh)
    assert first.backend_ref and first.backend_ref.isdigit()
    sbatches = backend.cli.stats.calls["sbatch"]

    # The controller died before it stored the reference: the next one submits again...
    again = JobHandle(job_id, JobState.QUEUED, None, compiled, utcnow(), launch_attempted_at=utcnow())
    second = backend.submit(again)
    assert second.backend_ref == first.backend_ref and "adopted" in second.reason
    assert backend.cli.stats.calls["sbatch"] == sbatches       # ...and finds it: no second sbatch
    assert len(_named(cluster, str(job_id))) == 1

    # An attempt that may still land and is not found yet: look, never submit.
    other = JobHandle(uuid.uuid4(), JobState.QUEUED, None, compiled, utcnow(), launch_attempted_at=utcnow())
    waiting = backend.submit(other)
    assert waiting.backend_ref is None and "may still land" in waiting.reason
    assert backend.cli.stats.calls["sbatch"] == sbatches
    backend.cli.scancel(first.backend_ref)


def test_a_controller_killed_mid_job_leaves_it_to_the_next(db_url, cluster, slurm_work_dir, token, tmp_path):
    """kill -9 of the whole service while the job runs: a new service process follows the
    same Slurm job to its end, and never submits it again."""
    import httpx

    from tests.backends.localkit import ServiceProcess

    go = tmp_path / "go"
    settings = slurm_settings(db_url, cluster, slurm_work_dir)
    first = ServiceProcess(settings, tmp_path / "first.log")
    second = None
    try:
        first.wait_ready()
        with httpx.Client(base_url=first.url, headers=bearer(token), timeout=30) as client:
            api = SlurmApi(client)
            api.template("two", spec(["--wait-file", str(go)], workers=["--wait-file", str(go)]))
            job = api.submit("two")
            running = api.wait_state(job["id"], "RUNNING", "FAILED")
            assert running["state"] == "RUNNING", running["error"]
        first.kill9()
        second = ServiceProcess(settings, tmp_path / "second.log")
        second.wait_ready()
        go.touch()
        with httpx.Client(base_url=second.url, headers=bearer(token), timeout=30) as client:
            done = SlurmApi(client).wait_state(job["id"], "SUCCEEDED", "FAILED")
        assert done["state"] == "SUCCEEDED", done["error"]
        assert done["backend_ref"] == running["backend_ref"]
        assert {line.split()[0].split("+")[0] for line in _named(cluster, job["id"])} == {running["backend_ref"]}
    finally:
        first.stop()
        if second is not None:
            second.stop()
