"""The what-if tests' history: jobs written as they happened (submitted, started, ended) on the sim
backend, cloned from one job submitted through the API so that every column is a real one; and
`trainjobs queue simulate` run as the operator runs it, a process of its own on that database."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, select

from service.core.clock import utcnow
from service.persistence.models import Job, Team
from service.persistence.session import make_engine
from tests.conftest import make_token

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Past:
    team: str
    submitted_ago_s: float     # how long before now it was submitted
    waited_s: float | None     # None: never started
    ran_s: float
    demand: int = 1            # cores
    priority: int = 0


def seed(client, db_url: str, jobs: list[Past], now: datetime | None = None) -> None:
    """Each job a row on backend `sim`, ended as `Past` says (a run not ended yet: none here)."""
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    assert r.status_code == 201, r.text
    now = now or utcnow()
    for name in {j.team for j in jobs} - {"alpha"}:
        make_token(db_url, name)                # the team, made as the service makes it
    engine = make_engine(db_url)
    with engine.begin() as conn:
        proto = dict(conn.execute(select(Job.__table__).where(Job.id == uuid.UUID(r.json()["id"]))).mappings().one())
        teams = dict(conn.execute(select(Team.name, Team.id)).all())
        rows = [_row(proto, teams[j.team], j, now) for j in jobs]
        # The prototype (its events and cost rows hold on to it) leaves every window replayed.
        conn.execute(Job.__table__.update().where(Job.id == proto["id"]).values(created_at=now - timedelta(days=900)))
        conn.execute(insert(Job.__table__), rows)
    engine.dispose()


def _row(proto: dict, team_id, j: Past, now: datetime) -> dict:
    submitted = now - timedelta(seconds=j.submitted_ago_s)
    started = None if j.waited_s is None else submitted + timedelta(seconds=j.waited_s)
    ended = None if started is None else started + timedelta(seconds=j.ran_s)
    return {**proto, "id": uuid.uuid4(), "team_id": team_id, "backend": "sim", "idempotency_key": None,
            "state": "SUCCEEDED" if started else "CANCELLED", "demand": {"core": j.demand}, "priority": j.priority,
            "created_at": submitted, "updated_at": ended or submitted, "started_at": started, "ended_at": ended,
            "backend_ref": None}


def simulate(db_url: str, tmp_path: Path, proposal, *args: str, env: dict | None = None,
             json_out: bool = True) -> subprocess.CompletedProcess:
    """`trainjobs queue simulate` against the database, the proposal written to a file as given
    (a dict as JSON, a str as it is)."""
    path = tmp_path / "proposal.json"
    path.write_text(proposal if isinstance(proposal, str) else json.dumps(proposal))
    environ = {**os.environ, "TRAINJOBS_DATABASE_URL": db_url, "TRAINJOBS_BACKENDS": '["sim"]',
               "TRAINJOBS_DEFAULT_BACKEND": "sim", "TRAINJOBS_LOG_LEVEL": "WARNING", **(env or {})}
    cmd = [sys.executable, "-m", "service.cli", "queue", "simulate", "--proposal", str(path), *args]
    return subprocess.run(cmd + (["--json"] if json_out else []), cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=300)

