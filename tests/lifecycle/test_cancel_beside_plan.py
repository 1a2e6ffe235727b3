"""Issue 51.3: a cancel never waits for a plan (service/lifecycle/aside.py). The plan is computed
on a thread of its own; a cancel asked meanwhile is sent, and the job seen CANCELLED, by the
loop's own thread while the plan is still under way (here: held until the cancel has ended)."""
from __future__ import annotations

import threading

from service.lifecycle.aside import Asked, beside
from tests.backends.localkit import Api
from tests.backends.sim.simkit import settings, submit, template
from tests.conftest import make_token


class _Held:
    """The real planner, held inside plan() until the test lets it go."""

    def __init__(self, planner) -> None:
        self.planner = planner
        self.planning = threading.Event()
        self.go = threading.Event()

    def plan(self, *args, **kw):
        self.planning.set()
        assert self.go.wait(60), "the test never let the plan go"
        return self.planner.plan(*args, **kw)


def test_a_cancel_asked_during_a_plan_ends_before_the_plan_does(api_client, db_url):
    client = api_client(settings(db_url, capacity={"sim": {"core": 2}}, run_reconciler=False),
                        make_token(db_url, "alpha", "admin"))
    api = Api(client)
    template(api, "long", {"sim-duration-seconds": "3600"})
    controller = client.app.state.services.controller
    controller.run_once()                       # this process takes the controller lock
    loop = controller.loops["sim"]
    running = submit(api, "long")
    loop.run_once()
    api.wait_state(running["id"], "PENDING", "RUNNING")
    loop.run_once()                             # seen RUNNING
    submit(api, "long")                         # something new: the next pass plans
    held = _Held(loop.planner)
    loop.planner = held
    passing = threading.Thread(target=loop.run_once, daemon=True)
    passing.start()
    try:
        assert held.planning.wait(30), "the pass never planned"
        r = client.post(f"/v1/jobs/{running['id']}/cancel")
        assert r.status_code == 202, r.text
        loop.wake()                             # what the cancel's wake does where the loop's thread runs
        api.wait_state(running["id"], "CANCELLED", timeout=20)
        assert passing.is_alive() and not held.go.is_set()      # the plan is still under way
    finally:
        held.go.set()
        passing.join(60)
    assert not passing.is_alive()


def test_work_set_aside_hands_back_its_value_or_its_error_and_serves_only_when_asked():
    asked = Asked()
    served: list[str] = []
    started, go, did_serve = threading.Event(), threading.Event(), threading.Event()

    def work() -> int:
        started.set()
        assert go.wait(10)
        return 7

    def ask_then_go() -> None:
        assert started.wait(10)
        asked.ask()
        assert did_serve.wait(10)       # the work ends only once the caller's thread served
        go.set()

    threading.Thread(target=ask_then_go, daemon=True).start()
    assert beside(work, asked, "t", lambda: served.append("cancels"),
                  lambda: (served.append("poll"), did_serve.set())) == 7
    assert served == ["cancels", "poll"]
    assert not asked.take()

    def fails() -> int:
        raise ValueError("no plan")
    try:
        beside(fails, Asked(), "t", lambda: served.append("never"))
    except ValueError as e:
        assert str(e) == "no plan"
    else:
        raise AssertionError("the work's error was not raised")
    assert served == ["cancels", "poll"]
