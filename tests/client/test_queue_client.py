"""The Python client's queue() (sync and async) and Job.queue against a real service."""
from __future__ import annotations

import uuid

import pytest

from tests.capacity.queuekit import http_scene, queue_server
from tests.conftest import ONE_DATABASE
from trainjobs_client import AsyncClient, Client, NotFound

pytestmark = ONE_DATABASE


@pytest.fixture
def server(db_url, work_dir):  # noqa: F811
    with queue_server(db_url, work_dir) as url:
        yield url


@pytest.fixture
def scene(server, token, db_url) -> dict:
    return http_scene(server, token, db_url)


def test_queue_and_a_waiting_jobs_place(server, token, scene):
    with Client(server, token, backoff=0.01) as tj:
        [q] = tj.queue()
        assert (q.backend, q.capacity, q.in_use, q.running_jobs, q.waiting_jobs) == ("local", {"core": 2},
                                                                                     {"core": 2}, 1, 2)
        assert [(e.position, e.team, e.id) for e in q.waiting] == [(1, "alpha", uuid.UUID(scene["a1"])),
                                                                   (2, "beta", None)]
        place = tj.get(scene["a1"]).queue
        assert place is not None and place.position == 1 and "needs 1 core, 0 free" in place.why
        # Its priority in parts (issue 52.4), read as the client's typed QueueFactors.
        assert place.factors is not None and (place.factors.tier, place.factors.fair_share.rank) == ("nominal", 1)
        assert q.waiting[1].factors is not None and q.waiting[1].factors.tier is None   # another team's job
        with pytest.raises(NotFound):
            tj.queue("vertex")


@pytest.mark.anyio
async def test_async_queue(server, token, scene):
    async with AsyncClient(server, token, backoff=0.01) as tj:
        [q] = await tj.queue("local", limit=1)
        assert len(q.waiting) == 1 and q.waiting_jobs == 2 and q.next_offset == 1
