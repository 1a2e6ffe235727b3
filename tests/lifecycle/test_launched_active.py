"""The controller's launched jobs (admission.launched_active): every state, with and without a
backend reference, counted as the rule says (both databases); and on PostgreSQL read by index,
not by visiting every QUEUED job (issue 39: 5 ms a query with 10,000 queued, three a pass)."""
import json
import uuid

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.dialects import postgresql

from service.lifecycle.admission import launched_active, running_count
from service.lifecycle.states import ACTIVE, JobState
from service.persistence.models import Job
from service.persistence.session import make_engine
from tests.lifecycle.test_engine import make_job


def _expected(state: JobState, has_ref: bool) -> bool:
    # The rule as the module states it: launched once it has a backend reference or has left QUEUED.
    return state in ACTIVE and (state is not JobState.QUEUED or has_ref)


def test_every_state_with_and_without_a_reference(session_factory):
    want = set()
    with session_factory() as s:
        for state in JobState:
            for has_ref in (False, True):
                job_id = make_job(s, state)
                s.execute(update(Job).where(Job.id == job_id).values(backend_ref="ref-1" if has_ref else None))
                if _expected(state, has_ref):
                    want.add(job_id)
        other = make_job(s, JobState.RUNNING)
        s.execute(update(Job).where(Job.id == other).values(backend="vertex", backend_ref="x"))
        s.commit()
        got = set(s.scalars(select(Job.id).where(launched_active("local"))))
        assert got == want and len(want) == len([st for st in ACTIVE if st is not JobState.QUEUED]) * 2 + 1
        assert running_count(s, "local") == len(want)


@pytest.mark.postgres
def test_the_queue_is_not_read_to_count_the_launched(pg_database):
    engine = make_engine(pg_database)
    with engine.begin() as c:
        c.execute(text("TRUNCATE jobs CASCADE"))
        team, template = uuid.uuid4(), uuid.uuid4()
        c.execute(text("INSERT INTO teams (id, name, created_at) VALUES (:t, :n, now())"), {"t": team, "n": f"q{team.hex[:6]}"})
        c.execute(text("INSERT INTO templates (id, team_id, name, latest_version, created_at, updated_at) "
                       "VALUES (:i, :t, 'big-queue', 1, now(), now())"), {"i": template, "t": team})
        c.execute(text(
            "INSERT INTO jobs (id, team_id, display_name, template_id, template_name, template_version, backend, "
            "state, parameters, overrides, labels, compiled, created_by, created_at, updated_at, attempt) "
            "SELECT gen_random_uuid(), :t, 'j', :tp, 'big-queue', 1, 'local', "
            "CASE WHEN g % 1000 = 0 THEN 'RUNNING' ELSE 'QUEUED' END, '{}', 'null', '{}', :c, 'x', now(), now(), 1 "
            "FROM generate_series(1, 5000) g"), {"t": team, "tp": template, "c": json.dumps({})})
        c.execute(text("UPDATE jobs SET backend_ref = 'r' WHERE state = 'RUNNING'"))
        c.execute(text("ANALYZE jobs"))
    query = select(func.count()).select_from(Job).where(launched_active("local"))
    sql = str(query.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    with engine.connect() as c:
        plan = c.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).scalar_one()
        assert c.exec_driver_sql(sql).scalar_one() == 5
    engine.dispose()
    removed, seq = 0, []

    def walk(node):
        nonlocal removed
        removed += node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
        if node["Node Type"] == "Seq Scan":
            seq.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"])
    assert not seq and removed < 50, plan
