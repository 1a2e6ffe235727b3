"""A gated admission pass with no room launches nothing, so it reads none of the jobs the
plan admits (service/lifecycle/loop.py): a backend at its limit with thousands queued read
them all on every pass a submit woke."""
import uuid
from types import SimpleNamespace

from service.lifecycle import admission
from service.lifecycle.admission import Plan
from service.lifecycle.loop import BackendLoop, TickStats
from service.lifecycle.protocol import Capabilities


def _loop(session_factory) -> tuple[BackendLoop, Plan]:
    plan = Plan(admit=[uuid.uuid4() for _ in range(3)])
    loop = BackendLoop(SimpleNamespace(name="local", capabilities=Capabilities(max_running=1)), session_factory,
                       None, fence=None,
                       gate=SimpleNamespace(start_pass=lambda: lambda session, job_id: None),
                       planner=SimpleNamespace(plan=lambda session, name, now, explain=True, room=None: plan))
    loop.preempter = SimpleNamespace(run=lambda orders: 0)
    return loop, plan


def test_no_room_reads_no_admitted_jobs(session_factory, monkeypatch):
    read: list = []
    monkeypatch.setattr(admission, "in_plan_order", lambda session, ids: read.append(list(ids)) or [])
    for room, expected in ((0, []), (-2, []), (1, None)):
        monkeypatch.setattr(admission, "room", lambda *a, room=room: room)
        loop, plan = _loop(session_factory)
        loop._admit(TickStats())
        assert read.pop() == (plan.admit if expected is None else expected)
