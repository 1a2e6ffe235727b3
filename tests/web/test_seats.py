"""Fair request seats (service/web/seats.py) through the real admission middleware: a stand-in
route that holds its seat until the test lets it go, so the order in which requests are seated is
seen exactly (no timing). Each test fails on the old arrival-order semaphore."""
from __future__ import annotations

import asyncio

from starlette.requests import Request

from service.web.overload import AdmissionMiddleware, learn_team
from tests.conftest import ONE_DATABASE

pytestmark = ONE_DATABASE


def _scope(token: str, path: str = "/v1/jobs") -> dict:
    return {"type": "http", "method": "GET", "path": path, "query_string": b"",
            "headers": [(b"authorization", f"Bearer {token}".encode())]}


class Stand:
    """The route: records who was seated, in order, and holds each seat until released."""

    def __init__(self, teams: dict[str, str] | None = None) -> None:
        self.seated: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.teams = teams or {}       # token -> team, learned as the real auth dependencies do

    async def __call__(self, scope, receive, send) -> None:
        token = dict(scope["headers"])[b"authorization"].decode().split()[1]
        name = scope["path"].rsplit("/", 1)[-1]
        if token in self.teams:
            learn_team(Request(scope), self.teams[token])
        self.seated.append(name)
        gate = self.gates.setdefault(name, asyncio.Event())
        await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _settle() -> None:
    for _ in range(20):          # call_soon_threadsafe hops and task starts
        await asyncio.sleep(0)


def _request(mw, token: str, name: str, statuses: dict) -> asyncio.Task:
    async def run() -> None:
        async def send(message) -> None:
            if message["type"] == "http.response.start":
                statuses[name] = message["status"]
        await mw(_scope(token, f"/v1/jobs/{name}"), None, send)
    return asyncio.create_task(run())


class Clock:
    """The middleware's clock (it measures what each request cost), moved by the test alone."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


async def _release(stand: Stand, name: str, clock: Clock | None = None, held: float = 0.0) -> None:
    if clock is not None:
        clock.now += held           # the request held its seat this long
    stand.gates.setdefault(name, asyncio.Event()).set()
    await _settle()


def test_a_team_that_asks_now_and_then_is_seated_before_a_team_reading_back_to_back():
    """One seat. Team a has its request seated and six more waiting; then team b asks once. b is
    seated next, before a's five others (in arrival order b was seventh)."""
    async def run() -> list[str]:
        stand, mw = await _two_teams_one_seat()
        statuses: dict = {}
        tasks = [_request(mw, "a", f"a{i}", statuses) for i in range(7)]
        await _settle()
        tasks.append(_request(mw, "b", "b0", statuses))
        await _settle()
        for name in ["a0", "b0", *[f"a{i}" for i in range(1, 7)]]:
            await _release(stand, name)
        await asyncio.gather(*tasks)
        assert set(statuses.values()) == {200}
        return stand.seated
    assert asyncio.run(run())[:2] == ["a0", "b0"]


def test_busy_teams_take_turns_by_what_their_requests_cost(monkeypatch):
    """Two teams with requests always waiting, one seat: a's requests hold the seat 4 times as
    long as b's. Over the run b is seated about 4 times as often: each team gets the same seconds
    of the seat, not the same number of turns."""
    clock = Clock()
    monkeypatch.setattr("service.web.overload.time", clock)

    async def run() -> list[str]:
        stand, mw = await _two_teams_one_seat()
        statuses: dict = {}
        tasks = [_request(mw, "a", f"a{i}", statuses) for i in range(40)]
        tasks += [_request(mw, "b", f"b{i}", statuses) for i in range(40)]
        await _settle()
        for done in range(40):
            name = stand.seated[done]
            await _release(stand, name, clock, 0.02 if name[0] == "a" else 0.005)
        for name in [f"a{i}" for i in range(40)] + [f"b{i}" for i in range(40)]:
            await _release(stand, name)
        await asyncio.gather(*tasks)
        return stand.seated[:40]
    first = asyncio.run(run())
    bs = sum(1 for name in first if name[0] == "b")
    assert 28 <= bs <= 34, first   # 4 to 1 (32 of 40); by turns 20, by arrival order 0


def test_a_teams_many_tokens_are_one_flow(monkeypatch):
    """Team a reads with two tokens, team c with one; once the route has authenticated them
    (learn_team), a's two tokens share one turn: with a's 12 and c's 6 requests waiting for one
    seat (each holding it 10 ms), c's are seated within the first 12 (a per-credential queue gives
    a two turns to c's one: c's last is 17th; arrival order: 18th)."""
    clock = Clock()
    monkeypatch.setattr("service.web.overload.time", clock)

    async def run() -> list[str]:
        stand = Stand({"a1": "team-a", "a2": "team-a", "c": "team-c"})
        mw = AdmissionMiddleware(stand, max_requests=1, queue_seconds=30, max_streams=10)
        statuses: dict = {}
        for token in ("a1", "a2", "c"):   # one request each, to learn the teams
            t = _request(mw, token, f"learn-{token}", statuses)
            await _settle()
            await _release(stand, f"learn-{token}")
            await t
        assert mw.seats.knows(_hash("a1"), "team-a") and mw.seats.knows(_hash("a2"), "team-a")
        hold = _request(mw, "h", "hold", statuses)
        await _settle()
        tasks = [_request(mw, "a1" if i % 2 else "a2", f"a{i}", statuses) for i in range(12)]
        tasks += [_request(mw, "c", f"c{i}", statuses) for i in range(6)]
        await _settle()
        await _release(stand, "hold", clock, 0.01)
        for _ in range(18):
            await _release(stand, stand.seated[-1], clock, 0.01)
        await asyncio.gather(hold, *tasks)
        return stand.seated[4:]
    order = asyncio.run(run())
    assert len(order) == 18
    last_c = max(i for i, name in enumerate(order) if name.startswith("c"))
    assert last_c <= 11, order


async def _learn(mw, stand: Stand, tokens) -> None:
    """One request of each token, so that the middleware knows its team (as a real route's auth does)."""
    statuses: dict = {}
    for token in tokens:
        t = _request(mw, token, f"learn-{token}", statuses)
        await _settle()
        await _release(stand, f"learn-{token}")
        await t


async def _two_teams_one_seat() -> tuple[Stand, AdmissionMiddleware]:
    """One seat; teams a and b each known to the middleware (one request each, not counted)."""
    stand = Stand({"a": "team-a", "b": "team-b"})
    mw = AdmissionMiddleware(stand, max_requests=1, queue_seconds=30, max_streams=10)
    await _learn(mw, stand, ["a", "b"])
    del stand.seated[:]
    return stand, mw


def _hash(token: str) -> bytes:
    from service.web.overload import caller_of
    return caller_of(_scope(token))


def test_a_flood_of_made_up_tokens_takes_one_turn():
    """One seat. A hostile client queues 50 requests, each with a token of its own making; then a
    member of team b asks once. b is seated after at most one of them: credentials not
    authenticated here share one flow (one flow per credential seated b 51st)."""
    async def run() -> list[str]:
        stand = Stand({"b": "team-b"})
        mw = AdmissionMiddleware(stand, max_requests=1, queue_seconds=30, max_streams=10)
        await _learn(mw, stand, ["b"])
        statuses: dict = {}
        hold = _request(mw, "h", "hold", statuses)
        await _settle()
        tasks = [_request(mw, f"made-up-{i}", f"x{i}", statuses) for i in range(50)]
        await _settle()
        tasks.append(_request(mw, "b", "b0", statuses))
        await _settle()
        await _release(stand, "hold")
        for _ in range(51):
            await _release(stand, stand.seated[-1])
        await asyncio.gather(hold, *tasks)
        return stand.seated[stand.seated.index("hold") + 1:]
    order = asyncio.run(run())
    assert len(order) == 51 and order.index("b0") <= 1, order


def test_seats_are_never_lost_and_flows_are_forgotten():
    """A hostile member's 2,000 made-up tokens, each one request that gives up waiting (timeout)
    or goes away (cancelled), beside a seat held throughout: afterwards every seat is free, nobody
    is counted as waiting, and what the seats remember is bounded (not 2,000 flows)."""
    async def run() -> AdmissionMiddleware:
        stand = Stand()
        mw = AdmissionMiddleware(stand, max_requests=2, queue_seconds=0.01, max_streams=10)
        statuses: dict = {}
        holders = [_request(mw, "h", f"h{i}", statuses) for i in range(2)]
        await _settle()
        timed_out = [_request(mw, f"x{i}", f"x{i}", statuses) for i in range(1000)]
        await asyncio.gather(*timed_out)
        cancelled = [_request(mw, f"y{i}", f"y{i}", statuses) for i in range(1000)]
        await _settle()
        for t in cancelled:
            t.cancel()
        await asyncio.gather(*cancelled, return_exceptions=True)
        assert all(statuses[f"x{i}"] == 503 for i in range(1000))
        for i in range(2):
            await _release(stand, f"h{i}")
        await asyncio.gather(*holders)
        after = _request(mw, "z", "z", statuses)        # seated at once: nothing leaked
        await _settle()
        assert stand.seated[-1] == "z"
        await _release(stand, "z")
        await after
        return mw
    mw = asyncio.run(run())
    assert mw.seats.busy == 0 and mw.seats.queued == 0
    assert len(mw.seats.flows) <= 70 and len(mw.seats.teams) <= 70


def test_the_app_learns_each_tokens_team_as_it_authenticates(settings, db_url):
    """Through the real app: a token's requests count against its team's flow once a route has
    authenticated it, whichever route (the API's dependency, the submit's cached one); two tokens
    of one team share a flow, another team's token has its own. A made-up token learns nothing."""
    from fastapi.testclient import TestClient

    from service.app import create_app
    from tests.conftest import bearer, make_token

    a1, a2 = make_token(db_url, "alpha", "admin", "a1"), make_token(db_url, "alpha", "member", "a2")
    b = make_token(db_url, "beta", "member", "b")
    with TestClient(create_app(settings)) as c:
        assert c.get("/v1/jobs", headers=bearer(a1)).status_code == 200
        assert c.post("/v1/jobs", json={"template": "nope"}, headers=bearer(a2)).status_code == 404
        assert c.get("/v1/templates", headers=bearer(b)).status_code == 200
        assert c.get("/v1/jobs", headers=bearer("tj_made_up")).status_code == 401
        mw = c.app.middleware_stack
        while not isinstance(mw, AdmissionMiddleware):
            mw = mw.app
        teams = mw.seats.teams
    assert teams[_hash(a1)] == teams[_hash(a2)] and teams[_hash(a1)].startswith(b"team\0")
    assert teams[_hash(b)] != teams[_hash(a1)]
    assert _hash("tj_made_up") not in teams


def test_a_request_waiting_elsewhere_gives_its_seat_to_another_team_and_takes_one_again():
    """One seat. A route in its thread waits on another process (core/off_seat.py, as a cold queue
    read or an import does): meanwhile another team's request is seated and answered; when the
    wait ends the first takes a seat again (after the seat is free) and is answered. With the
    seat held throughout, the second was refused 503 after its 0.2 s."""
    import threading

    from starlette.concurrency import run_in_threadpool

    from service.core.off_seat import waiting_elsewhere

    elsewhere, entered, seated_again = threading.Event(), threading.Event(), threading.Event()

    def blocking_part() -> None:
        with waiting_elsewhere():
            entered.set()
            assert elsewhere.wait(30)
        seated_again.set()

    async def route(scope, receive, send) -> None:
        if scope["path"].endswith("/slow"):
            await run_in_threadpool(blocking_part)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def run() -> tuple[dict, AdmissionMiddleware, list]:
        mw = AdmissionMiddleware(route, max_requests=1, queue_seconds=0.2, max_streams=10)
        statuses: dict = {}
        slow = _request(mw, "a", "slow", statuses)
        while not entered.is_set():
            await asyncio.sleep(0.01)
        fast = _request(mw, "b", "fast", statuses)
        await fast
        busy_while_away = [mw.seats.busy, mw.in_flight]
        elsewhere.set()
        await slow
        return statuses, mw, busy_while_away
    statuses, mw, busy_while_away = asyncio.run(run())
    assert statuses == {"slow": 200, "fast": 200}
    assert busy_while_away == [0, 0]          # the waiting request held no seat
    assert seated_again.is_set() and mw.seats.busy == 0 and mw.in_flight == 0


def test_at_most_so_many_requests_wait_elsewhere_without_their_seat():
    """TRAINJOBS_MAX_REQUESTS_WAITING_ELSEWHERE 1, two seats: of two routes waiting on another
    process, the first gives its seat back, the second keeps its own (each still holds a thread
    and a database connection: the pools are sized for the seats and that many more)."""
    import threading

    from starlette.concurrency import run_in_threadpool

    from service.core.off_seat import waiting_elsewhere

    release = threading.Event()
    entered = threading.Semaphore(0)

    def blocking_part() -> None:
        with waiting_elsewhere():
            entered.release()
            assert release.wait(30)

    async def route(scope, receive, send) -> None:
        await run_in_threadpool(blocking_part)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def run() -> tuple[list, dict]:
        mw = AdmissionMiddleware(route, max_requests=2, queue_seconds=5, max_streams=10, max_elsewhere=1)
        statuses: dict = {}
        tasks = [_request(mw, token, token, statuses) for token in ("a", "b")]
        for _ in range(2):
            while not entered.acquire(blocking=False):
                await asyncio.sleep(0.01)
        during = [mw.elsewhere, mw.seats.busy]
        release.set()
        await asyncio.gather(*tasks)
        return during + [mw.elsewhere, mw.seats.busy], statuses
    counts, statuses = asyncio.run(run())
    assert counts == [1, 1, 0, 0] and statuses == {"a": 200, "b": 200}


def test_a_process_runs_two_requests_at_once_and_a_burst_waits_its_turn_by_default():
    """The defaults (docs/http.md, "Whose request runs next"): two slots, 5 s in the queue."""
    from service.slices import Settings
    s = Settings()
    assert (s.max_concurrent_requests, s.request_queue_seconds, s.max_requests_waiting_elsewhere) == (2, 5.0, 8)
