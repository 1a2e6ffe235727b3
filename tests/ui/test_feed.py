"""The live feed behind /ui/stream: one read per interval serves every open page of
the process, each team hears only of its own jobs, late commits are not missed,
nothing is handed out twice, and the reader stops when the last page leaves."""
from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from service.persistence.models import Job, Team, utcnow
from service.ui.feed import JobFeed
from tests.backends.localkit import settings_for
from tests.conftest import ONE_DATABASE
from tests.ui.conftest import template_body

pytestmark = ONE_DATABASE


@pytest.fixture
def ui_settings(db_url, work_dir):
    # Jobs are stored and never run: only these tests change their rows.
    return settings_for(db_url, work_dir, run_reconciler=False, local_max_running_jobs=0)


def _jobs(api, n: int) -> list[str]:
    body = template_body("t", workers=0)
    api.template("t", body["spec"], parameters=body["parameters"])
    return [api.submit("t")["id"] for _ in range(n)]


def _touch(session_factory, job_id: str, state: str, at=None) -> None:
    with session_factory() as s:
        s.execute(update(Job).where(Job.id == uuid.UUID(job_id)).values(state=state, updated_at=at or utcnow()))
        s.commit()


def _team(session_factory, name: str) -> uuid.UUID:
    with session_factory() as s:
        return s.scalar(select(Team.id).where(Team.name == name))


async def _until(predicate, what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def _drain(sub) -> list[dict]:
    out = []
    while not sub.queue.empty():
        out.append(sub.queue.get_nowait())
    return out


def test_one_read_serves_every_open_page_of_the_team(api, session_factory, tokens):
    [job] = _jobs(api, 1)
    alpha, beta = _team(session_factory, "alpha"), _team(session_factory, "beta")

    async def scenario():
        feed = JobFeed(session_factory, interval=3600)  # one read, then a long sleep
        _touch(session_factory, job, "PAUSED")
        pages = [feed.subscribe(alpha) for _ in range(5)]
        only_this_job = feed.subscribe(alpha, uuid.UUID(job))
        other_job = feed.subscribe(alpha, uuid.uuid4())
        other_team = feed.subscribe(beta)
        await _until(lambda: feed.reads == 1, "the first read")
        await _until(lambda: all(not p.queue.empty() for p in pages), "every page to hear of it")
        for page in pages + [only_this_job]:
            changes = _drain(page)
            assert [(c["id"], c["state"]) for c in changes] == [(job, "PAUSED")]
        assert _drain(other_job) == [] and _drain(other_team) == []
        assert feed.reads == 1  # eight pages, one query
        feed._task.cancel()

    asyncio.run(scenario())


def test_late_commits_are_caught_and_nothing_is_handed_out_twice(api, session_factory):
    first, late = _jobs(api, 2)
    alpha = _team(session_factory, "alpha")

    async def scenario():
        feed = JobFeed(session_factory, interval=0.02)
        page = feed.subscribe(alpha)
        _touch(session_factory, first, "PAUSED")
        await _until(lambda: not page.queue.empty(), "the first change")
        got = _drain(page)
        seen = feed._since
        # A transaction that stamped its row before the feed's cursor but committed after it.
        _touch(session_factory, late, "UPDATING", at=seen - timedelta(seconds=2))
        reads = feed.reads
        await _until(lambda: feed.reads >= reads + 5, "five more reads")
        changes = [(c["id"], c["state"]) for c in got + _drain(page)]
        assert changes.count((first, "PAUSED")) == 1 and changes.count((late, "UPDATING")) == 1
        feed.unsubscribe(page)
        await _until(lambda: feed._task.done(), "the reader to stop with no page left")

    asyncio.run(scenario())


def test_a_page_that_falls_far_behind_is_told_to_reload(api, session_factory):
    from service.ui.feed import Subscriber
    jobs = _jobs(api, 3)
    feed = JobFeed(session_factory, interval=3600)
    page = Subscriber(_team(session_factory, "alpha"), None, asyncio.Queue(2))  # room for two changes
    feed.subscribers.add(page)
    for job in jobs:
        _touch(session_factory, job, "PAUSED")
    feed._since = utcnow()
    feed._dispatch(feed._read())
    assert page.overflowed and page.queue.qsize() == 2
