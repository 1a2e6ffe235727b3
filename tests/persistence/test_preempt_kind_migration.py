"""Migration 0016 gives a preemption's kind a column (issue 50.2): a reason stored as
"<kind>: <why>" is split on the way up and joined again on the way down, on SQLite and
PostgreSQL."""
from __future__ import annotations

from sqlalchemy import text, update

from service.persistence import migrate
from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory


def test_the_kind_leaves_the_reason_for_its_column_and_comes_back(client, db_url, demo):
    r = client.post("/v1/jobs", json={"template": "mwms-demo"})
    assert r.status_code == 201, r.text
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as s:
            s.execute(update(Job).values(preempt_kind="reclaim", preempt_reason="team beta takes back its quota"))
            s.commit()
        migrate.downgrade(db_url, "0015_team_last_launch_index")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT preempt_reason FROM jobs")).scalar_one() == \
                "reclaim: team beta takes back its quota"
        migrate.upgrade(db_url)
        with engine.connect() as conn:
            assert tuple(conn.execute(text("SELECT preempt_kind, preempt_reason FROM jobs")).one()) == \
                ("reclaim", "team beta takes back its quota")
    finally:
        engine.dispose()
