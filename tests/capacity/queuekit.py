"""Rows for the queue tests: a backend's capacity, team shares, and jobs shaped as the
capacity API and the controller would leave them (demand, priority, running), written
with SQLAlchemy through the service's own models."""
from __future__ import annotations

import uuid

from sqlalchemy import select, update

from service.core.clock import utcnow
from service.persistence.models import BackendCapacity, Job, Team, TeamShare
from service.persistence.session import make_engine, make_session_factory
from tests.apikit import DEMO


def _write(db_url: str, fn) -> None:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            fn(session)
            session.commit()
    finally:
        engine.dispose()


def set_capacity(db_url: str, backend: str, capacity: dict[str, int]) -> None:
    _write(db_url, lambda s: s.add_all(BackendCapacity(backend=backend, resource=r, amount=n)
                                       for r, n in capacity.items()))


def set_share(db_url: str, team: str, backend: str, nominal: dict[str, int], weight: float = 1.0) -> None:
    def add(session):
        team_id = session.execute(select(Team.id).where(Team.name == team)).scalar_one()
        session.add(TeamShare(team_id=team_id, backend=backend, nominal=nominal, borrowing_limit={},
                              lending_limit={}, weight=weight))
    _write(db_url, add)


def shape(db_url: str, job_id: str, *, demand: dict[str, int], priority: int = 0, running: bool = False) -> None:
    values: dict = {"demand": demand, "priority": priority}
    if running:
        values |= {"state": "RUNNING", "backend_ref": f"test-{job_id}", "started_at": utcnow()}
    _write(db_url, lambda s: s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(**values)))


def submit(client, name: str, headers: dict | None = None) -> str:
    r = client.post("/v1/jobs", json={"template": DEMO["name"], "display_name": name}, headers=headers or {})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def add_template(client, headers: dict) -> None:
    r = client.post("/v1/templates", json=DEMO, headers=headers)
    assert r.status_code == 201, r.text
