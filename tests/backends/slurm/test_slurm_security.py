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
from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE


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


class _As:
    """The same service, asked with another team's token."""

    def __init__(self, client, token: str):
        self._c, self._h = client, {"Authorization": f"Bearer {token}"}

    def get(self, url, **kw):
        return self._c.get(url, headers={**self._h, **kw.pop("headers", {})}, **kw)

    def post(self, url, **kw):
        return self._c.post(url, headers={**self._h, **kw.pop("headers", {})}, **kw)


TEAM_USERS = {"alpha": "daemon", "beta": "bin"}   # each with a primary group of its own (1, 2)


def test_one_teams_task_cannot_touch_another_teams_running_job(make_slurm_client, cluster, db_url, slurm_work_dir,
                                                              tmp_path):
    """Issue 33, hole 5: with every team's tasks as the one job user, alpha's task appended fake
    progress to beta's log, wrote its exit record and planted a file in its output. Each team
    now runs as its own Slurm user and the run folders are the team's group's only."""
    if os.geteuid() != 0:
        pytest.skip("only a root service runs jobs as other users")
    from tests.backends.slurm.conftest import SlurmApi
    from tests.conftest import make_token

    alpha = make_slurm_client(slurm_team_users=TEAM_USERS)
    beta = SlurmApi(_As(alpha.c, make_token(db_url, "beta", "admin")))
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    beta.template("victim", spec(["--lines", "3", "--wait-file", str(gate / "go")]))
    victim = beta.submit("victim")
    beta.wait_state(victim["id"], "RUNNING")
    run = slurm_work_dir / victim["id"]
    alpha.template("writer", spec(["--cross-attack", str(run)]))
    writer = alpha.submit("writer")
    done = alpha.wait_state(writer["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    lines = [ln["message"] for ln in alpha.all_logs(writer["id"])]
    tries = [m for m in lines if m.startswith("cross ")]
    assert len(tries) == 5 and all("refused" in m for m in tries), tries
    assert lines[0].endswith("as uid 1"), lines[0]
    assert not (run / "output" / "FORGED").exists()

    (gate / "go").touch()
    ended = beta.wait_state(victim["id"], "SUCCEEDED", "FAILED")
    assert ended["state"] == "SUCCEEDED", ended["error"]
    mine = [ln["message"] for ln in beta.all_logs(victim["id"])]
    assert mine[0].endswith("as uid 2") and not any("FORGED" in m for m in mine), mine
    assert json.loads((run / "tasks" / "workerpool0-0.exit").read_text())["exit_code"] == 0
    # A team's own run folder: its user's group only (root owns it; others cannot even enter).
    st = os.stat(run)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 2, 0o750)


def test_team_users_are_checked_at_start(cluster, slurm_work_dir, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only a root service runs jobs as other users")
    db_url = f"sqlite:///{tmp_path}/unused.db"   # no service runs: the settings only need a URL
    for users, words in (({"alpha": "root"}, "is root"), ({"alpha": "no-such-user-here"}, "is no user"),
                         ({"alpha": "nobody"}, "shares its uid or primary group with TRAINJOBS_SLURM_JOB_USER"),
                         ({"alpha": "daemon", "beta": "daemon"}, "shares its uid or primary group"),
                         ({"alpha": "sync"}, "shares its uid or primary group")):   # sync's group is nogroup
        backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir,
                                                              slurm_team_users=users)))
        with pytest.raises(SlurmConfigError, match=words):
            backend.start_client()


def test_a_job_submitted_before_its_team_got_a_user_is_still_followed(cluster, slurm_work_dir, tmp_path):
    """The operator maps a team to a user of its own while its job runs as the shared job user:
    the restarted service follows that job under the user it was submitted as (state.json), and
    does not take it for gone (which would end it FAILED while it still runs)."""
    if os.geteuid() != 0:
        pytest.skip("only a root service runs jobs as other users")
    import uuid

    from service import jobspec
    from service.lifecycle.protocol import JobHandle
    from service.lifecycle.states import JobState
    from service.persistence.models import utcnow
    from tests.waiting import wait_for

    db_url = f"sqlite:///{tmp_path}/unused.db"   # no service runs: the settings only need a URL
    before = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    before.start_client()
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    _, compiled = jobspec.build(spec(["--wait-file", str(gate / "go")]), [], {}, None, display_name="t", labels={})
    job_id = uuid.uuid4()
    ref = before.submit(JobHandle(job_id, JobState.QUEUED, None, compiled, utcnow(), team="alpha")).backend_ref
    assert ref
    after = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir,
                                                        slurm_team_users=TEAM_USERS)))
    after.start_client()
    followed = JobHandle(job_id, JobState.RUNNING, ref, compiled, utcnow(), team="alpha")

    def seen(state: JobState):
        obs = [o for o in after.poll([followed]) if o.state is not None]
        assert not any(o.state in (JobState.FAILED, JobState.CANCELLED) for o in obs), obs
        return any(o.state == state for o in obs)
    wait_for(lambda: cluster.run("squeue", "-h", "-j", ref, "-o", "%T").strip() == "RUNNING", "the job to run")
    assert not seen(JobState.SUCCEEDED)     # running, and not taken for gone
    (gate / "go").touch()
    wait_for(lambda: seen(JobState.SUCCEEDED), "the job to be seen SUCCEEDED under its first user")


def test_a_retry_after_its_team_got_a_user_writes_its_first_attempts_output(cluster, slurm_work_dir, tmp_path):
    """The first attempt ran as the shared job user; its team then got a user of its own: the
    retry's user reaches and writes the first attempt's output (its checkpoints)."""
    if os.geteuid() != 0:
        pytest.skip("only a root service runs jobs as other users")
    import dataclasses
    import subprocess
    import sys
    import uuid

    from service import jobspec
    from service.lifecycle.protocol import JobHandle
    from service.lifecycle.states import JobState
    from service.persistence.models import utcnow

    db_url = f"sqlite:///{tmp_path}/unused.db"   # no service runs: the settings only need a URL
    before = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir)))
    before.start_client()
    _, compiled = jobspec.build(spec(["--lines", "1"]), [], {}, None, display_name="t", labels={})
    first = JobHandle(uuid.uuid4(), JobState.QUEUED, None, compiled, utcnow(), team="alpha")
    before._prepare(first, before.run_of(first.id))
    after = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, slurm_work_dir,
                                                        slurm_team_users=TEAM_USERS)))
    after.start_client()
    retry = JobHandle(uuid.uuid4(), JobState.QUEUED, None, dataclasses.replace(compiled, output_of=str(first.id)),
                      utcnow(), team="alpha")
    after._prepare(retry, after.run_of(retry.id))
    ckpt = after.run_of(first.id).output / "ckpt-2.index"
    wrote = subprocess.run([sys.executable, "-I", "-S", "-c", f"open({str(ckpt)!r}, 'w').write('x')"],
                           user=1, group=1, extra_groups=[], env={}, capture_output=True, text=True, timeout=30)
    assert wrote.returncode == 0, wrote.stderr
    assert os.stat(ckpt).st_uid == 1
