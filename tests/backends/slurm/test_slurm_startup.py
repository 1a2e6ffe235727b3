"""A broken cluster or setting is refused before the service listens, in one line naming
what is wrong; Slurm's refusals and endings say what Slurm said and what to set; a job the
listing no longer shows ends as the cluster's job-completion record says."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import uuid

import pytest

from service import jobspec
from service.backends.slurm import SlurmBackend, SlurmConfigError
from service.backends.slurm.entry import slurm_config_of
from service.lifecycle.protocol import JobHandle, PermanentBackendError
from service.lifecycle.states import JobState
from service.persistence.models import utcnow
from tests.backends.localkit import ServiceProcess
from tests.backends.slurm.conftest import slurm_settings, spec
from tests.servekit import free_port
from tests.waiting import wait_for


def _refused(db_url, cluster, work_dir, **overrides) -> str:
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, work_dir, **overrides)))
    with pytest.raises(SlurmConfigError) as e:
        backend.start_client()
    text = str(e.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)   # no database work: one is enough
def test_serve_refuses_a_default_partition_outside_the_allowed_list_in_one_line(db_url, cluster, slurm_work_dir,
                                                                                tmp_path):
    """Before: serve started, and every submit got a 422 blaming labels.slurm-partition,
    a label the member never set."""
    settings = slurm_settings(db_url, cluster, slurm_work_dir, slurm_partition="nosuch",
                              slurm_allowed_partitions=["debug"])
    done = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", str(free_port())], cwd=tmp_path,
                          env=ServiceProcess.env_of(settings), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainjobs: refusing to start: "), done.stderr
    assert "TRAINJOBS_SLURM_PARTITION='nosuch' is not in TRAINJOBS_SLURM_ALLOWED_PARTITIONS" in lines[0]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_cluster_that_does_not_answer_or_lacks_a_partition_is_refused_at_start(db_url, cluster, slurm_work_dir,
                                                                                tmp_path):
    not_conf = tmp_path / "not-slurm.conf"
    not_conf.write_text("this is not a slurm.conf\n")
    text = _refused(db_url, cluster, slurm_work_dir, slurm_conf=not_conf)
    assert "does not answer" in text and f"TRAINJOBS_SLURM_CONF={not_conf}" in text
    # The right cluster, the wrong controller port: nothing answers there.
    wrong = tmp_path / "wrong-port.conf"
    wrong.write_text(cluster.conf.read_text().replace(f"SlurmctldPort={cluster.port}\n",
                                                      f"SlurmctldPort={free_port()}\n"))
    # (The client retries a refused connection for seconds; a short timeout ends it sooner, same answer.)
    assert "does not answer" in _refused(db_url, cluster, slurm_work_dir, slurm_conf=wrong,
                                         slurm_command_timeout_seconds=2)
    text = _refused(db_url, cluster, slurm_work_dir, slurm_allowed_partitions=["debug", "gpu"])
    assert "TRAINJOBS_SLURM_ALLOWED_PARTITIONS names partition 'gpu'" in text and "it has: debug" in text
    # ...and the cluster as it is starts.
    SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir, slurm_partition="debug",
                                                slurm_allowed_partitions=["debug"]))).start_client()


def test_a_task_bigger_than_a_node_names_the_setting_to_change(make_slurm_client, cluster):
    """mwms-demo asks n1-standard-4's 4 CPUs a task: on smaller nodes sbatch refuses."""
    api = make_slurm_client(slurm_cpus_per_task=None)
    template = spec(["--lines", "1"])
    template["chief"]["machine_type"] = "n1-standard-16"   # 16 vCPUs; the nodes have 8
    api.template("big", template)
    job = api.submit("big")
    done = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    err = done["error"]
    assert "CPU count per node can not be satisfied" in err["message"], err
    assert "TRAINJOBS_SLURM_CPUS_PER_TASK" in err["message"], err
    assert err["source"] == "slurm" and "slurm_state" in err
    assert err["slurm_reason"] == "Batch job submission failed: Requested node configuration is not available", err


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_job_no_longer_listed_ends_as_the_job_completion_record_says(db_url, cluster, slurm_work_dir):
    """Its exit records gone (say, storage that lost them): the jobcomp file still says
    COMPLETED, so it is SUCCEEDED, not FAILED as the exit records alone would have it."""
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    backend.start_client()
    _, compiled = jobspec.build(spec(["--lines", "1"]), [], {}, None, display_name="t", labels={})
    job_id = uuid.uuid4()
    ref = backend.submit(JobHandle(job_id, JobState.QUEUED, None, compiled, utcnow())).backend_ref
    assert ref
    wait_for(lambda: cluster.run("squeue", "-h", "--states=all", "-j", ref, "-o", "%T").split() == ["COMPLETED"],
             "the Slurm job to complete", 60)
    run = backend.run_of(job_id)
    for f in (run.path / "tasks").glob("*.exit"):
        f.write_text("")
    running = JobHandle(job_id, JobState.RUNNING, ref, compiled, utcnow())
    obs = backend._observe(running, {})   # a trusted listing that no longer shows it
    assert obs is not None and obs.state == JobState.SUCCEEDED, obs
    assert "job-completion record" in obs.reason
    # A record of that id under another name (ids start again after a controller loses its state) is not it.
    assert backend.cli.jobcomp(ref, f"trainjobs-{uuid.uuid4()}") is None


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_lookup_slurm_refuses_is_permanent(db_url, cluster, slurm_work_dir, tmp_path):
    """Before, every refusal of the lookup was "try again later": a job waited in QUEUED for ever."""
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    backend.start_client()
    cfg = backend.cli.cfg
    not_conf = tmp_path / "not-slurm.conf"
    not_conf.write_text("this is not a slurm.conf\n")
    backend.cli.cfg = dataclasses.replace(cfg, conf=not_conf)   # a cluster config broken after the start
    with pytest.raises(PermanentBackendError) as e:
        backend.cli.find_by_name("trainjobs-x", 0)
    assert e.value.details["slurm_reason"], e.value.details
    # (An unreachable controller stays transient: test_slurm_outage submits during an outage.)
