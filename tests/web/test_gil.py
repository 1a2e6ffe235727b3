"""The GIL's switch interval follows the log streams a process has open (service/web/gil.py):
short from TRAINJOBS_GIL_FAST_SWITCH_STREAMS on (a request's thread does not wait behind the
loop's writes to thousands of followers), Python's own below (a burst of submits switches
threads ten times less often). Driven through the real admission middleware, which counts
the streams, with stand-in streams that stay open until told to end."""
from __future__ import annotations

import asyncio
import sys

import pytest

from service.web.gil import GilSwitch
from service.web.overload import AdmissionMiddleware


@pytest.fixture
def gil():
    switch = GilSwitch(0.0002, streams=3)
    before = sys.getswitchinterval()
    switch.start()
    yield switch
    switch.stop()
    assert sys.getswitchinterval() == before


def test_the_interval_is_short_only_while_enough_streams_are_open(gil):
    normal = gil.normal
    seen: list[float] = []

    async def run() -> None:
        end = asyncio.Event()
        opened = asyncio.Semaphore(0)

        async def route(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            opened.release()
            await end.wait()
            await send({"type": "http.response.body", "body": b""})

        async def ignore(message) -> None:
            pass

        mw = AdmissionMiddleware(route, max_requests=8, queue_seconds=1, max_streams=100, max_streams_per_caller=100,
                                 on_streams=gil.streams)
        scope = {"type": "http", "method": "GET", "path": "/ui/stream", "query_string": b"", "headers": []}
        streams = []
        for _ in range(3):
            seen.append(sys.getswitchinterval())
            streams.append(asyncio.create_task(mw(dict(scope), None, ignore)))
            await asyncio.wait_for(opened.acquire(), 10)
        seen.append(sys.getswitchinterval())        # 3 open: short
        end.set()
        await asyncio.wait_for(asyncio.gather(*streams), 10)
        seen.append(sys.getswitchinterval())        # all ended: Python's own again

    asyncio.run(run())
    assert seen == [normal, normal, normal, pytest.approx(0.0002), normal]
    assert gil.open == 0


def test_zero_streams_means_always_short():
    switch = GilSwitch(0.0003, streams=0)
    before = sys.getswitchinterval()
    try:
        switch.start()
        assert sys.getswitchinterval() == pytest.approx(0.0003)
        switch.streams(5)
        switch.streams(0)
        assert sys.getswitchinterval() == pytest.approx(0.0003)
    finally:
        switch.stop()
    assert sys.getswitchinterval() == before


def test_a_switch_not_started_leaves_the_interval_alone():
    """A test's app that never started its lifespan: its middleware counts streams, nothing changes."""
    before = sys.getswitchinterval()
    switch = GilSwitch(0.0001, streams=1)
    switch.streams(10)
    assert sys.getswitchinterval() == before
