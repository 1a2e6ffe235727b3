"""Attacks on the slurm backend, for real: a template that tries to run shell on the
service host through sbatch, a task that tries to forge its records or read the
host's files through its log, and a configuration that would run jobs as root."""
from __future__ import annotations

import json
import os

import pytest

from service.backends.slurm import SlurmBackend, SlurmConfigError
from service.backends.slurm.entry import slurm_config_of
from tests.backends.slurm.conftest import slurm_settings, spec


def test_template_text_never_reaches_a_shell_and_tasks_are_not_root(make_slurm_client, cluster, tmp_path,
                                                                     slurm_work_dir):
    api = make_slurm_client()
    marker = tmp_path / "pwned"
    dump = tmp_path / "env"
    dump.mkdir()
    os.chmod(dump, 0o777)
    evil = f"$(touch {marker}); `touch {marker}` ; touch {marker}"
    # The task's working folder is <run>/work: ".." is its run folder.
    template = spec(["--dump-env", str(dump), "--attack", ".."])
    template["container"]["env"] = {"EVIL": evil}
    api.template("evil", template)
    job = api.submit("evil", display_name="evil-$(id)")
    run = slurm_work_dir / job["id"]
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    env = json.loads((dump / "chief-0.json").read_text())
    assert env["EVIL"] == evil            # the template's env, as written, in the task only
    assert not marker.exists()            # ...and never run by any shell
    batch = (run / "batch.sh").read_text()
    assert "touch" not in batch and "EVIL" not in batch
    lines = [ln["message"] for ln in api.all_logs(job["id"])]
    assert lines[0].endswith("as uid 65534"), lines[0]
    attacks = {m.split(":")[0]: m for m in lines if m.startswith("attack ")}
    assert len(attacks) == 5, lines
    assert all("refused" in m for m in attacks.values()), attacks
    assert not (run / "logs" / "evil.log").exists() and not (run / "tasks" / "evil.exit").exists()


def test_root_service_needs_an_unprivileged_job_user(db_url, cluster, slurm_work_dir):
    if os.geteuid() != 0:
        pytest.skip("only a root service must name a job user")
    for user, words in ((None, "TRAINJOBS_SLURM_JOB_USER must name"), ("root", "is root"),
                        ("no-such-user-here", "is no user")):
        backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir, slurm_job_user=user)))
        with pytest.raises(SlurmConfigError, match=words):
            backend.start_client()


def test_misconfiguration_names_every_setting_to_fix(db_url, cluster, tmp_path):
    backend = SlurmBackend(slurm_config_of(slurm_settings(
        db_url, cluster, None, slurm_conf=tmp_path / "missing.conf", slurm_bin_dir=tmp_path,
        slurm_partition="bad name")))
    with pytest.raises(SlurmConfigError) as e:
        backend.start_client()
    text = str(e.value)
    for words in ("sbatch not found", "TRAINJOBS_SLURM_CONF=", "TRAINJOBS_SLURM_WORK_DIR is not set",
                  "TRAINJOBS_SLURM_PARTITION="):
        assert words in text, text


def test_a_work_dir_the_job_user_cannot_reach_is_refused_at_start(db_url, cluster, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only a root service runs jobs as another user")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, closed / "runs")))
    with pytest.raises(SlurmConfigError, match="not searchable by others"):
        backend.start_client()


def test_another_users_job_with_our_name_is_neither_adopted_nor_followed(db_url, cluster, slurm_work_dir,
                                                                          tmp_path):
    """A cluster user who learns a job's id names a job of theirs after it (here: root, any
    user but the job user): trainjobs submits its own and follows only that."""
    import uuid

    from service import jobspec
    from service.lifecycle.protocol import JobHandle
    from service.lifecycle.states import JobState
    from service.persistence.models import utcnow

    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    backend.start_client()
    job_id = uuid.uuid4()
    fake = cluster.run("sbatch", "--parsable", f"--job-name=trainjobs-{job_id}", "--chdir=/tmp",
                       "--output=/dev/null", "--wrap", "true").strip()
    _, compiled = jobspec.build(spec(["--lines", "1"]), [], {}, None, display_name="t", labels={})
    handle = JobHandle(job_id, JobState.QUEUED, None, compiled, utcnow(), launch_attempted_at=None)
    ours = backend.submit(handle).backend_ref
    assert ours and ours != fake
    followed = JobHandle(job_id, JobState.QUEUED, ours, compiled, utcnow())
    obs = backend.poll([followed])
    assert obs and all(o.backend_ref in (None, ours) for o in obs), obs
    backend.cli.scancel(ours)
