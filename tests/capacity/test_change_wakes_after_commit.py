"""Issue 50.4: a change of the shared settings wakes the controller and drops the cached queue
only once it is committed: woken before (the unit of work commits after the route returns), a
pass or a reader could read the old rows and keep them for a cache period."""
from __future__ import annotations

from sqlalchemy import select

from service.persistence.models import BackendCapacity, TeamShare
from tests.conftest import bearer, make_token


def test_the_controller_is_woken_after_the_change_is_committed(client, db_url):
    operator = bearer(make_token(db_url, "ops", "operator"))
    services = client.app.state.services
    seen: list[tuple] = []

    def wake(*args, **kwargs):       # what a woken pass would read, from a connection of its own
        with services.session_factory() as s:
            seen.append((s.execute(select(BackendCapacity.amount)).scalars().all(),
                         s.execute(select(TeamShare.nominal)).scalars().all()))
    services.waker.wake = wake
    r = client.put("/v1/capacity/local", json={"resources": {"core": 4}}, headers=operator)
    assert r.status_code == 200, r.text
    r = client.put("/v1/teams/alpha/shares/local", json={"nominal": {"core": 2}}, headers=operator)
    assert r.status_code == 200, r.text
    assert seen == [([4], []), ([4], [{"core": 2}])]
