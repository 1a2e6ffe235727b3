"""Every TRAINJOBS_SLURM_* limit, enforced: the command timeout, the poll interval, the
cap on running jobs, the rendezvous timeout; and what a role asks Slurm for."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from service import jobspec
from service.backends.slurm import SlurmBackend, SlurmConfigError, script
from service.backends.slurm.backend import LAUNCHER
from service.backends.slurm.cli import SlurmCli
from service.backends.slurm.entry import slurm_config_of
from service.backends.slurm.runs import SlurmRun
from service.lifecycle.protocol import JobHandle, TransientBackendError
from service.lifecycle.states import JobState
from service.persistence.models import utcnow
from tests.backends.slurm.conftest import slurm_settings, spec
from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE


def _handle(args, **extra):
    _, compiled = jobspec.build(spec(args, **extra), [], {}, None, display_name="t", labels={})
    return JobHandle(uuid.uuid4(), JobState.QUEUED, None, compiled, utcnow())


def test_a_slurm_call_over_its_timeout_is_transient(db_url, cluster, slurm_work_dir):
    # A controller that takes each call and never answers: every call runs into the timeout (a
    # timeout too short for any call was not enough: on a loaded host sinfo could end before
    # subprocess.run began to count, and the check passed).
    with cluster.silent_controller() as silent:
        slow = slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir, slurm_conf=silent,
                                              slurm_command_timeout_seconds=0.5))
        # The start-up check (one sinfo) refuses it, naming the setting...
        with pytest.raises(SlurmConfigError, match="TRAINJOBS_SLURM_COMMAND_TIMEOUT_SECONDS"):
            SlurmBackend(slow).start_client()
        # ...and a cluster that stops answering later makes each call over it a transient error.
        backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
        backend.start_client()
        backend.cli = SlurmCli(slow)
        with pytest.raises(TransientBackendError, match="TRAINJOBS_SLURM_COMMAND_TIMEOUT_SECONDS"):
            backend.submit(_handle(["--lines", "1"]))
    assert not cluster.jobs_active()


def test_one_squeue_per_poll_interval(db_url, cluster, slurm_work_dir):
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir,
                                                        slurm_poll_interval_seconds=600)))
    backend.start_client()
    job = _handle(["--lines", "1"])
    ref = backend.submit(job).backend_ref
    followed = JobHandle(job.id, JobState.PENDING, ref, job.compiled, job.created_at)
    for _ in range(3):
        backend.begin_pass()
        backend.poll([followed])
        backend.poll([followed])   # a second batch of the same pass reuses the listing
        backend.end_pass()
    assert backend.cli.stats.calls["squeue"] == 1 + 1   # the submit's lookup, then one listing in 600 s


def test_at_most_slurm_max_running_jobs_at_once(make_slurm_client, cluster, tmp_path):
    api = make_slurm_client(slurm_max_running_jobs=1)
    go = tmp_path / "go"
    api.template("wait", spec(["--wait-file", str(go)]))
    first, second = api.submit("wait"), api.submit("wait")
    assert api.wait_state(first["id"], "RUNNING", "FAILED")["state"] == "RUNNING"
    assert api.job(second["id"])["state"] == "QUEUED" and api.job(second["id"])["backend_ref"] is None
    assert len(cluster.jobs_active()) == 1
    go.touch()
    assert api.wait_state(second["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"


def test_a_task_alone_gives_up_after_the_rendezvous_timeout(tmp_path):
    """The launcher by itself (as srun starts it): its peer never publishes an address."""
    cfg = slurm_config_of(slurm_settings("sqlite://", _NoCluster(), tmp_path,
                                                   slurm_rendezvous_timeout_seconds=0.5))
    job = _handle(["--lines", "1"], workers=["--lines", "1"])
    run = SlurmRun.of(tmp_path, job.id)
    run.create(["workerpool0-0", "workerpool1-0"], None)
    run.job_file.write_text(json.dumps(script.job_file(job.id, job.compiled, cfg, str(run.path), str(run.output))))
    env = {"PATH": "/usr/bin:/bin", "SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}
    out = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), str(run.path), "0"], env=env, timeout=30)
    assert out.returncode == 3
    assert run.task_record("workerpool0-0", "exit")["exit_code"] == 3
    assert run.task_record("workerpool0-0", "started") is None          # the command never ran
    assert "TRAINJOBS_SLURM_RENDEZVOUS_TIMEOUT_SECONDS" in run.log("workerpool0-0").read_text()


class _NoCluster:
    conf = Path("/nonexistent/slurm.conf")


def test_what_each_role_asks_slurm_for(tmp_path):
    template = spec(["a"], workers=["b"], worker_count=3, timeout_seconds=90,
                    labels={"slurm-partition": "gpu", "slurm-qos": "high"})
    template["workers"].update(machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4",
                               accelerator_count=2)
    _, compiled = jobspec.build(template, [], {}, None, display_name="t", labels={})
    cfg = slurm_config_of(slurm_settings("sqlite://", _NoCluster(), tmp_path, slurm_cpus_per_task=None,
                                                   slurm_account="team-a", slurm_mem_per_cpu_mb=512))
    job_id = uuid.uuid4()
    argv = script.sbatch_argv(job_id, compiled, cfg, "/runs/x", (1000, 1000))
    sep = argv.index(":")
    chief, workers = argv[:sep], argv[sep + 1:-1]
    assert f"--job-name=trainjobs-{job_id}" in chief and "--uid=1000" in chief and "--gid=1000" in chief
    assert {"--ntasks=1", "--cpus-per-task=4", "--time=2", "--partition=gpu", "--qos=high", "--account=team-a",
            "--mem-per-cpu=512"} <= set(chief)
    assert {"--ntasks=3", "--cpus-per-task=8", "--gpus-per-task=2", "--time=2"} <= set(workers)
    assert "--gpus-per-task" not in " ".join(chief)
    assert argv[-1] == "/runs/x/batch.sh" and os.sep in argv[-1]
