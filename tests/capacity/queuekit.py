"""Rows for the queue tests: a backend's capacity, team shares, and jobs shaped as the
capacity API and the controller would leave them (demand, priority, running), written
with SQLAlchemy through the service's own models."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from sqlalchemy import select, update

from service.app import create_app
from service.core.clock import utcnow
from service.persistence.models import BackendCapacity, Job, Team, TeamShare
from service.persistence.session import make_engine, make_session_factory
from tests.apikit import DEMO
from tests.backends.localkit import settings_for, thread_server
from tests.conftest import bearer, make_token


def write(db_url: str, fn) -> None:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            fn(session)
            session.commit()
    finally:
        engine.dispose()


def set_capacity(db_url: str, backend: str, capacity: dict[str, int]) -> None:
    write(db_url, lambda s: s.add_all(BackendCapacity(backend=backend, resource=r, amount=n)
                                       for r, n in capacity.items()))


def set_share(db_url: str, team: str, backend: str, nominal: dict[str, int], weight: float = 1.0) -> None:
    def add(session):
        team_id = session.execute(select(Team.id).where(Team.name == team)).scalar_one()
        session.add(TeamShare(team_id=team_id, backend=backend, nominal=nominal, borrowing_limit={},
                              lending_limit={}, weight=weight))
    write(db_url, add)


def shape(db_url: str, job_id: str, *, demand: dict[str, int], priority: int = 0, running: bool = False) -> None:
    values: dict = {"demand": demand, "priority": priority}
    if running:
        values |= {"state": "RUNNING", "backend_ref": f"test-{job_id}", "started_at": utcnow()}
    write(db_url, lambda s: s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(**values)))


def submit(client, name: str, headers: dict | None = None) -> str:
    r = client.post("/v1/jobs", json={"template": DEMO["name"], "display_name": name}, headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def add_template(client, headers: dict) -> None:
    r = client.post("/v1/templates", json=DEMO, headers=headers)
    assert r.status_code == 201, r.text


@contextmanager
def queue_server(db_url: str, work_dir: Path) -> Iterator[str]:
    """A real service on 127.0.0.1 whose jobs stay QUEUED (no controller; slots to spare),
    its queue computed on every read."""
    settings = settings_for(db_url, work_dir, local_max_running_jobs=8, run_reconciler=False, queue_cache_seconds=0)
    with thread_server(create_app(settings)) as url:
        yield url


def http_scene(server: str, alpha_token: str, db_url: str) -> dict:
    """local has 2 cores, all held by beta's running b1 (beta borrows them all); beta's b2
    waits (the older), alpha's a1 (priority 3, inside alpha's nominal quota) goes first."""
    beta = bearer(make_token(db_url, "beta", "admin"))
    alpha = bearer(alpha_token)
    ids = {}
    with httpx.Client(base_url=server, timeout=60) as http:
        for headers in (alpha, beta):
            assert http.post("/v1/templates", json=DEMO, headers=headers).status_code == 201
        for key, name, headers in (("b1", "beta-running", beta), ("b2", "beta-hidden", beta),
                                   ("a1", "alpha-waits", alpha)):
            r = http.post("/v1/jobs", json={"template": DEMO["name"], "display_name": name}, headers=headers)
            assert r.status_code == 201, r.text
            ids[key] = r.json()["id"]
    set_capacity(db_url, "local", {"core": 2})
    set_share(db_url, "alpha", "local", {"core": 1})
    shape(db_url, ids["b1"], demand={"core": 2}, running=True)
    shape(db_url, ids["b2"], demand={"core": 1})
    shape(db_url, ids["a1"], demand={"core": 1}, priority=3)
    return ids
