"""Job rows as JobHandles: what a backend is told of a job (its team, its priority class)."""
from sqlalchemy import update

from service.lifecycle.handles import handle_of_job, handle_of_row, read_handles
from service.persistence.models import Job
from tests.lifecycle.test_engine import make_job, row


def test_a_handle_carries_the_jobs_team_and_priority_class(session_factory):
    with session_factory() as s:
        jid = make_job(s)
        plain = make_job(s)
        s.execute(update(Job).where(Job.id == jid).values(priority_class="urgent"))
        s.commit()
        rows = {r.id: r for r in read_handles(s, [Job.id.in_([jid, plain])])}
        handle = handle_of_row(session_factory, rows[jid])
        assert handle.team == "alpha" and handle.priority_class == "urgent"
        assert handle_of_row(session_factory, rows[plain]).priority_class is None
        assert handle_of_job(row(s, jid)).priority_class == "urgent"
