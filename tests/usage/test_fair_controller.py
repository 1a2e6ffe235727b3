"""Through the real controller on the sim backend (a job is a timer), on SQLite and PostgreSQL:
the controller's usage recompute folds a team's run of yesterday into the ledger, and with one
launch slot that team yields to a team that used nothing, though the other team ran last (with no
ledger the team served least recently, alpha, would go first: tests/capacity/test_fair_defaults)."""
from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import update

from service.core.clock import utcnow
from service.persistence.models import Job
from tests.backends.conftest import token  # noqa: F401 (a fixture)
from tests.backends.sim.simkit import submit, template
from tests.capacity.test_fair_defaults import _db, _started, _teams
from tests.waiting import wait_for


def _yesterday(api_client, db_url, token) -> None:
    """Before the controller starts: a job of alpha's that ran 10 hours yesterday (one core: 1
    billing unit at the defaults), as the engine leaves a finished job."""
    alpha, _ = _teams(api_client, db_url, token, run_reconciler=False)
    template(alpha, "short", {"sim-duration-seconds": "1"})
    job = submit(alpha, "short")["id"]
    now = utcnow()
    _db(db_url, lambda s: s.execute(update(Job).where(Job.id == uuid.UUID(job)).values(
        state="SUCCEEDED", backend_ref=f"sim-{job}", launch_attempted_at=now - timedelta(hours=30),
        started_at=now - timedelta(hours=30), ended_at=now - timedelta(hours=20))))
    alpha.c.__exit__(None, None, None)


def test_a_team_that_used_much_yesterday_yields_today(api_client, db_url, token):
    _yesterday(api_client, db_url, token)
    alpha, zulu = _teams(api_client, db_url, token, sim_max_running_jobs=1, usage_recompute_seconds=1)
    template(zulu, "short", {"sim-duration-seconds": "1"})
    template(zulu, "long", {"sim-duration-seconds": "3600"})

    def alphas_units():
        return {t["team"]: t["units"] for t in alpha.c.get("/v1/usage").json()["teams"]}.get("alpha", 0) > 0.8
    wait_for(alphas_units, "the controller's recompute to fold alpha's run of yesterday")
    blocker = submit(zulu, "long")["id"]           # zulu launches last: alpha is the team served least recently
    zulu.wait_state(blocker, "RUNNING")
    mine = submit(alpha, "short")["id"]            # alpha's job waits longer than zulu's
    theirs = submit(zulu, "short")["id"]
    assert zulu.c.post(f"/v1/jobs/{blocker}/cancel").status_code == 202    # the slot frees
    assert _started(zulu, theirs) < _started(alpha, mine)
