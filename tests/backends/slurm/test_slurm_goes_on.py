"""A preempted job goes on on another backend where its checkpoints are (issue 52.5): local and a
real Slurm cluster share one output folder (TRAINJOBS_LOCAL_SHARED_OUTPUT_DIR and
TRAINJOBS_SLURM_SHARED_OUTPUT_DIR, the same), so a job that accepts both, preempted on one (a
team inside its nominal quota takes its capacity back), has its next attempt placed on the other,
where it finds the checkpoint its first attempt saved and finishes from it; both ways."""
from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from service.auth.service import get_or_create_team
from service.persistence.models import Job, TeamShare
from service.persistence.session import make_engine, make_session_factory
from tests.backends.localkit import Api
from tests.backends.slurm.conftest import JOB_USER, slurm_settings
from tests.conftest import bearer, make_token
from tests.waiting import wait_for

RESUMABLE = Path(__file__).parents[1] / "programs" / "resumable.py"
TIMEOUT = 90.0


def _template(backends: list[str]) -> dict:
    return {"container": {"image_uri": "trainjobs-test:1", "command": ["python", str(RESUMABLE)]},
            "chief": {"container": {"args": []}}, "backends": backends}


# (where it runs first, where it goes on, the resource one job holds on the first)
DIRECTIONS = [("local", "slurm", "core"), ("slurm", "local", "vcpu")]


def _beta_holds(db_url: str, backend: str, resource: str) -> None:
    """beta: the first backend's one unit guaranteed (alpha borrows it, and beta reclaims it)."""
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            team = get_or_create_team(session, "beta")
            session.add(TeamShare(team_id=team.id, backend=backend, nominal={resource: 1}, borrowing_limit={},
                                  lending_limit={}, weight=1.0))
            session.commit()
    finally:
        engine.dispose()


@pytest.mark.parametrize(("here", "there", "resource"), DIRECTIONS, ids=["local-to-slurm", "slurm-to-local"])
def test_a_preempted_job_goes_on_on_the_other_backend_from_its_checkpoint(api_client, db_url, cluster, slurm_work_dir,
                                                                          work_dir, token, tmp_path, here, there,
                                                                          resource):
    if os.geteuid() != 0:
        pytest.skip("replica uids and the Slurm job user need the tests to run as root")
    shared = tmp_path / "shared"
    beta = make_token(db_url, "beta", "admin")
    _beta_holds(db_url, here, resource)
    settings = slurm_settings(db_url, cluster, slurm_work_dir, backends=["local", "slurm"], default_backend="local",
                              local_work_dir=work_dir, local_shared_output_dir=shared, slurm_shared_output_dir=shared,
                              capacity={here: {resource: 1}}, preemption_grace_seconds=10.0,
                              local_cancel_grace_seconds=3.0)
    client = api_client(settings, token)
    api = Api(client)
    api.template("goes-on", _template([here, there]))
    r = client.post("/v1/templates", json={"name": "holds", "spec": _template([here])}, headers=bearer(beta))
    assert r.status_code == 201, r.text
    r = client.post("/v1/jobs", json={"template": "goes-on"})   # no `backend`: it accepts both
    assert r.status_code == 201, r.text
    first = r.json()["id"]
    assert api.wait_state(first, "RUNNING", timeout=TIMEOUT)["backend"] == here
    saved = shared / first / "checkpoints" / "checkpoint.json"
    wait_for(saved.exists, "the first attempt's checkpoint in the shared folder", TIMEOUT)
    wrote = json.loads(saved.read_text())
    assert (wrote["slurm_job"] is None) == (here == "local"), wrote

    r = client.post("/v1/jobs", json={"template": "holds", "backend": here}, headers=bearer(beta))
    assert r.status_code == 201, r.text
    holder = r.json()["id"]
    failed = api.wait_state(first, "FAILED", timeout=TIMEOUT)
    assert failed["error"]["cause"] == "preemption", failed["error"]

    services = client.app.state.services

    def attempt() -> Job | None:
        with services.session_factory() as session:
            return session.execute(select(Job).where(Job.retry_of == uuid.UUID(first))).scalars().first()
    nxt = wait_for(attempt, "the next attempt", TIMEOUT)
    assert [a["backend"] for a in nxt.accepts] == [here, there]
    done = api.wait_state(str(nxt.id), "SUCCEEDED", timeout=TIMEOUT)
    assert done["backend"] == there
    assert done["placement"].startswith(f"continues on {there}: its checkpoints are in {shared}"), done["placement"]
    said = [line["message"] for line in api.all_logs(str(nxt.id))]
    resumed = next(json.loads(m.split(" ", 1)[1]) for m in said if m.startswith("RESUMED "))
    assert resumed == wrote                                              # what the first attempt saved
    events = api.events(str(nxt.id))
    assert f"continues on {here} or {there}: its checkpoints are in {shared}" in events[0]["reason"], events[0]
    # Still the job's alone: the Slurm job user's after Slurm, the service's again after a local attempt.
    owner = _uid(JOB_USER) if there == "slurm" else 0
    wait_for(lambda: os.stat(shared / first).st_uid == owner, f"the job's folder to be uid {owner}'s", TIMEOUT)
    assert stat.S_IMODE(os.stat(shared / first).st_mode) == 0o700

    assert client.post(f"/v1/jobs/{holder}/cancel", headers=bearer(beta)).status_code in (200, 202)
    wait_for(lambda: client.get(f"/v1/jobs/{holder}", headers=bearer(beta)).json()["state"] == "CANCELLED",
             "beta's job cancelled", TIMEOUT)


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid



def test_a_slurm_task_of_another_team_cannot_reach_a_jobs_shared_folder(make_slurm_client, cluster, db_url, tmp_path):
    """Attack: with a Slurm user per team (TRAINJOBS_SLURM_TEAM_USERS), a task of team alpha tries to
    list, read and write team beta's running job's folder in the shared output folder, and to list
    the shared folder: each is refused (the job's folder 0700 and beta's user's, the shared one 0711)."""
    if os.geteuid() != 0:
        pytest.skip("only a root service runs jobs as other users")
    from tests.backends.slurm.conftest import SlurmApi
    from tests.backends.slurm.test_slurm_security import TEAM_USERS, _As

    shared = tmp_path / "shared"
    alpha = make_slurm_client(slurm_team_users=TEAM_USERS, slurm_shared_output_dir=shared)
    beta = SlurmApi(_As(alpha.c, make_token(db_url, "beta", "admin")))
    beta.template("victim", _template(["slurm"]))
    victim = beta.submit("victim")["id"]
    saved = shared / victim / "checkpoints" / "checkpoint.json"
    wait_for(saved.exists, "beta's checkpoint in the shared folder", TIMEOUT)
    assert os.stat(shared / victim).st_uid == _uid(TEAM_USERS["beta"])
    alpha.template("peeks", {**_template(["slurm"]), "chief": {"container": {"args": ["--peek", str(shared / victim)]}}})
    peeker = alpha.submit("peeks")["id"]
    done = alpha.wait_state(peeker, "SUCCEEDED", "FAILED", timeout=TIMEOUT)
    assert done["state"] == "SUCCEEDED", done["error"]
    said = [line["message"] for line in alpha.all_logs(peeker)]
    tries = [m for m in said if m.startswith("peek ")]
    assert len(tries) == 4 and all("refused" in m for m in tries), tries
    assert not (shared / victim / "FORGED").exists()
    assert json.loads(saved.read_text())["uid"] == _uid(TEAM_USERS["beta"])
    assert beta.c.post(f"/v1/jobs/{victim}/cancel").status_code in (200, 202)
    beta.wait_state(victim, "CANCELLED", timeout=TIMEOUT)
