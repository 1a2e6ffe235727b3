"""The delivery lookups (service/webhooks/lookups.py) with real threads and event loops: one
lookup per name in flight, at most `threads` threads, a delivery that gives up leaves the
others their answer, and nothing is kept once answered. The resolver here is a function that
waits for the test's word (the system resolver on a silent name server is
tests/webhooks/test_slow_name_server.py); a team's share of the threads."""
from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from datetime import UTC, datetime

import pytest

from service.webhooks import signing
from service.webhooks.dispatcher import Dispatcher, Due
from service.webhooks.limits import WebhookLimits
from service.webhooks.lookups import Busy, Lookups, for_process

WAIT = 10.0


class GatedResolver:
    """getaddrinfo's signature; each call waits until `open` is set, then answers 127.0.0.1."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.fail: set[str] = set()

    def __call__(self, host, port, type=0):  # noqa: A002 - getaddrinfo's own keyword
        with self.lock:
            self.calls.append(host)
        assert self.open.wait(WAIT), "the test never let the lookup answer"
        if host in self.fail:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


def one_pass(lookups: Lookups, names: list[str], timeout: float) -> list:
    """As the dispatcher's pass: a loop of its own, every delivery with its deadline, then closed."""
    async def one(name: str):
        try:
            async with asyncio.timeout(timeout):
                return await lookups.resolve(name, 443)
        except (TimeoutError, OSError) as e:
            return e

    async def every():
        return await asyncio.gather(*(one(n) for n in names))

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(every())
    finally:
        loop.close()


def wait_until(predicate, what: str) -> None:
    done = threading.Event()
    for _ in range(1000):
        if predicate():
            return
        done.wait(0.01)
    raise AssertionError(f"{what} did not happen within 10 s")


def test_passes_that_give_up_on_a_silent_name_leave_one_lookup_and_one_thread():
    resolver = GatedResolver()
    lookups = Lookups(4, resolve=resolver)
    for _ in range(5):   # five passes, ten deliveries each to the one name; each gives up
        out = one_pass(lookups, ["hook.silent.test"] * 10, 0.05)
        assert all(isinstance(o, TimeoutError) for o in out)
    assert resolver.calls == ["hook.silent.test"]
    assert lookups.started() == 1 and lookups.in_flight() == 1
    resolver.open.set()
    wait_until(lambda: lookups.in_flight() == 0, "the lookup's end")
    # Nothing kept: the next delivery asks the resolver again.
    out = one_pass(lookups, ["hook.silent.test"], WAIT)
    assert out[0][0][4] == ("127.0.0.1", 443)
    assert resolver.calls == ["hook.silent.test"] * 2


def test_the_threads_never_exceed_the_bound_and_queued_names_are_answered_in_turn():
    resolver = GatedResolver()
    lookups = Lookups(2, resolve=resolver)
    names = [f"hook{i}.silent.test" for i in range(6)]
    out = one_pass(lookups, names, 0.05)
    assert all(isinstance(o, TimeoutError) for o in out)
    wait_until(lambda: len(resolver.calls) == 2, "two lookups")
    assert lookups.started() == 2 and lookups.in_flight() == 6
    alive = [t for t in threading.enumerate() if t.name.startswith("webhook-lookup-")]
    assert len(alive) >= 2 and all(t.daemon for t in alive)   # a stopping service does not wait for them
    resolver.open.set()
    wait_until(lambda: lookups.in_flight() == 0, "every queued lookup")
    assert sorted(resolver.calls) == sorted(names) and lookups.started() == 2


def test_one_delivery_giving_up_leaves_the_answer_to_the_others_and_errors_reach_every_waiter():
    resolver = GatedResolver()
    resolver.fail.add("gone.test")
    lookups = Lookups(4, resolve=resolver)

    async def both():
        patient = asyncio.ensure_future(lookups.resolve("hook.test", 443))
        impatient = asyncio.ensure_future(lookups.resolve("hook.test", 443))
        failing = [asyncio.ensure_future(lookups.resolve("gone.test", 443)) for _ in range(2)]
        await asyncio.sleep(0)
        impatient.cancel()
        resolver.open.set()
        answer = await asyncio.wait_for(patient, WAIT)
        errors = await asyncio.gather(*failing, return_exceptions=True)
        return answer, impatient, errors

    answer, impatient, errors = asyncio.run(both())
    assert impatient.cancelled() and answer[0][4] == ("127.0.0.1", 443)
    assert all(isinstance(e, socket.gaierror) for e in errors) and len(errors) == 2
    assert sorted(resolver.calls) == ["gone.test", "hook.test"]


def test_the_process_shares_one_set_per_bound_and_a_bound_is_needed():
    assert for_process(7) is for_process(7) and for_process(7) is not for_process(8)
    assert for_process(7).threads == 7
    with pytest.raises(ValueError):
        Lookups(0)


def test_one_team_holds_at_most_half_the_threads_and_its_deliveries_past_that_fail_saying_so():
    resolver = GatedResolver()
    lookups = Lookups(4, resolve=resolver)
    assert lookups.per_owner == 2
    lookups.submit("a1.silent.test", 443, "team-a")
    lookups.submit("a2.silent.test", 443, "team-a")
    with pytest.raises(Busy, match="2 name lookups of this team's webhooks are already waiting"):
        lookups.submit("a3.silent.test", 443, "team-a")
    lookups.submit("a1.silent.test", 443, "team-a")   # a name in flight is shared: no thread more
    lookups.submit("a2.silent.test", 443, "team-b")   # whoever asked it
    lookups.submit("b1.silent.test", 443, "team-b")   # the other team still gets a thread
    wait_until(lambda: len(resolver.calls) == 3, "three lookups")
    assert lookups.started() == 3 and lookups.in_flight() == 3
    resolver.open.set()
    wait_until(lambda: lookups.in_flight() == 0, "the lookups' end")
    lookups.submit("a3.silent.test", 443, "team-a").result(WAIT)   # its share is back


def test_the_dispatcher_gives_each_delivery_its_teams_share():
    resolver = GatedResolver()
    dispatcher = Dispatcher(None, None, WebhookLimits(concurrency=4, request_timeout=0.3), fence=None)
    dispatcher.lookups = Lookups(4, resolve=resolver)
    secret = signing.new_secret()
    a, b = uuid.uuid4(), uuid.uuid4()
    due = [Due(uuid.uuid4(), signing.new_message_id(), 0, datetime.now(UTC), {"n": i},
               f"https://{host}/h", secret, "json", team)
           for i, (host, team) in enumerate([("a1.silent.test", a), ("a2.silent.test", a),
                                             ("a3.silent.test", a), ("b1.silent.test", b)])]
    errors = [o.error for o in dispatcher._send(due)]
    timeout = "no complete answer within 0.3 s (TRAINJOBS_WEBHOOK_REQUEST_TIMEOUT_SECONDS)"
    assert errors == [timeout, timeout, "a3.silent.test was not looked up: 2 name lookups of this team's "
                      "webhooks are already waiting on slow name servers", timeout], errors
    resolver.open.set()
