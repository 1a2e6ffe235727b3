"""Helpers for the preemption tests: one service (API, controller, local backend) whose local
capacity is one core, two teams (alpha borrows it, beta's nominal quota is that core), and
replicas that save a step on SIGTERM (programs/preemptible.py).

Storing a job's demand at submit is the capacity-api part of issue 38; until it is merged the
tests stand in for it with an engine listener that gives every new job a demand of one core, in
the transaction that creates it (so the controller never sees a job without one)."""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

from sqlalchemy import select, update

from service.auth.service import get_or_create_team
from service.lifecycle.engine import Change
from service.persistence.models import Job, JobEvent, TeamShare
from service.persistence.session import make_engine, make_session_factory
from tests.backends.localkit import settings_for, spec
from tests.conftest import bearer, make_token
from tests.waiting import wait_for

PROGRAM = Path(__file__).parent / "programs" / "preemptible.py"
TIMEOUT = 60.0


def shares(db_url: str) -> None:
    """beta: one core guaranteed; alpha: nothing guaranteed, may borrow (no row: borrow anything)."""
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            beta = get_or_create_team(session, "beta")
            session.add(TeamShare(team_id=beta.id, backend="local", nominal={"core": 1}, borrowing_limit={},
                                  lending_limit={}, weight=1.0))
            session.commit()
    finally:
        engine.dispose()


def one_core_each(session, change: Change) -> None:
    if change.from_state is None:
        session.execute(update(Job).where(Job.id == change.job_id).values(demand={"core": 1}))


class Service:
    """The running service and the two teams' calls to it."""

    def __init__(self, api_client, db_url: str, work_dir: Path, tmp: Path, *, holding: bool = False,
                 **overrides) -> None:
        """holding: a replica that gets SIGTERM waits for `self.hold` before it saves and exits."""
        self.tokens = {t: make_token(db_url, t, "admin") for t in ("alpha", "beta")}
        self.member = make_token(db_url, "alpha", "member", name="alpha-member")
        shares(db_url)
        values = dict(capacity={"local": {"core": 1}}, preemption_grace_seconds=60.0)
        values.update(overrides)
        self.client = api_client(settings_for(db_url, work_dir, **values), self.tokens["alpha"])
        self.services = self.client.app.state.services
        self.services.lifecycle.listen(one_core_each)
        self.tmp = tmp
        self.state = tmp / "state"
        self.state.mkdir()
        self.state.chmod(0o777)  # the replicas, unprivileged uids when the tests run as root, write here
        self.release = tmp / "release"
        self.hold = tmp / "hold"
        if not holding:
            self.hold.touch()
        for team in ("alpha", "beta"):
            self.post(team, "/v1/templates", json={"name": f"long-{team}", "spec": spec(
                ["--state-dir", str(self.state), "--release", str(self.release), "--hold", str(self.hold)],
                command=[sys.executable, str(PROGRAM)])})
            self.post(team, "/v1/templates", json={"name": f"quick-{team}", "spec": spec(["--lines", "1"])})

    def post(self, team: str, path: str, **kw) -> dict:
        r = self.client.post(path, headers=bearer(self.tokens[team]), **kw)
        assert r.status_code in (200, 201, 202), r.text
        return r.json()

    def submit(self, team: str, template: str) -> str:
        return self.post(team, "/v1/jobs", json={"template": f"{template}-{team}", "backend": "local"})["id"]

    def job(self, job_id) -> dict:
        r = self.client.get(f"/v1/jobs/{job_id}", headers=bearer(self.tokens["alpha"]))
        if r.status_code == 404:
            r = self.client.get(f"/v1/jobs/{job_id}", headers=bearer(self.tokens["beta"]))
        assert r.status_code == 200, r.text
        return r.json()

    def wait_state(self, job_id, *states: str, timeout: float = TIMEOUT) -> dict:
        seen: list[dict] = []

        def reached():
            seen[:] = [self.job(job_id)]
            return seen[0] if seen[0]["state"] in states else None
        try:
            return wait_for(reached, f"job {job_id} to reach {states}", timeout)
        except AssertionError as e:
            last = {k: seen[0].get(k) for k in ("state", "waiting_reason", "error")} if seen else None
            raise AssertionError(f"{e}; last {last}") from None

    def row(self, job_id):
        with self.services.session_factory() as session:
            return session.execute(select(Job).where(Job.id == uuid.UUID(str(job_id)))).scalar_one()

    def next_attempt(self, job_id) -> Job:
        def found():
            with self.services.session_factory() as session:
                return session.execute(select(Job).where(Job.retry_of == uuid.UUID(str(job_id)))
                                       .order_by(Job.attempt.desc())).scalars().first()
        return wait_for(found, f"a new attempt of job {job_id}", TIMEOUT)

    def events(self, job_id) -> list[JobEvent]:
        with self.services.session_factory() as session:
            return list(session.execute(select(JobEvent).where(JobEvent.job_id == uuid.UUID(str(job_id)))
                                        .order_by(JobEvent.id)).scalars())

    def passes(self, n: int) -> None:
        """Wait for `n` more passes of the controller's loops (a real signal, bounded)."""
        controller = self.services.controller
        start = controller.ticks
        wait_for(lambda: controller.ticks >= start + n, f"{n} controller passes", TIMEOUT)
