"""A gated admission pass with no room launches nothing, so it reads none of the jobs the
plan admits (service/lifecycle/loop.py): a backend at its limit with thousands queued read
them all on every pass a submit woke. And once a pass found no room and ordered no
preemption, the passes submits wake are skipped until the next full pass."""
import uuid
from types import SimpleNamespace

from service.lifecycle import admission
from service.lifecycle.admission import Plan
from service.lifecycle.loop import BackendLoop, TickStats
from service.lifecycle.protocol import Capabilities
from tests.lifecycle.test_wake_gap import _Recording


def _loop(session_factory, preempt=()) -> tuple[BackendLoop, Plan]:
    plan = Plan(admit=[uuid.uuid4() for _ in range(3)], preempt=list(preempt))
    loop = BackendLoop(SimpleNamespace(name="local", capabilities=Capabilities(max_running=1)), session_factory,
                       None, fence=None,
                       gate=SimpleNamespace(start_pass=lambda: lambda session, job_id: None),
                       planner=SimpleNamespace(plan=lambda session, name, now, explain=True, room=None, **kw: plan))
    loop.resends: list[bool] = []
    loop.preempter = SimpleNamespace(run=lambda orders, resend=True: loop.resends.append(resend) or 0)
    return loop, plan


def test_no_room_reads_no_admitted_jobs(session_factory, monkeypatch):
    read: list = []
    monkeypatch.setattr(admission, "in_plan_order", lambda session, ids: read.append(list(ids)) or [])
    for room, expected in ((0, []), (-2, []), (1, None)):
        monkeypatch.setattr(admission, "room", lambda *a, room=room: room)
        loop, plan = _loop(session_factory)
        loop._admit(TickStats())
        assert read.pop() == (plan.admit if expected is None else expected)


def test_a_pass_with_no_room_and_no_preemption_marks_the_backend_full(session_factory, monkeypatch):
    monkeypatch.setattr(admission, "in_plan_order", lambda session, ids: [])
    order = SimpleNamespace(job_id=uuid.uuid4())
    for room, preempt, full in ((0, (), True), (-1, (), True), (1, (), False), (0, (order,), False)):
        monkeypatch.setattr(admission, "room", lambda *a, room=room: room)
        loop, _ = _loop(session_factory, preempt)
        loop._admit(TickStats())
        assert loop._no_room is full, (room, preempt)


def test_an_admission_pass_resends_stops_only_with_new_orders(session_factory, monkeypatch):
    """Stops not sent yet (a transient error, a predecessor's) are the full pass's to resend."""
    monkeypatch.setattr(admission, "in_plan_order", lambda session, ids: [])
    monkeypatch.setattr(admission, "room", lambda *a: 1)
    loop, _ = _loop(session_factory)
    loop._admit(TickStats())
    loop._admit(TickStats(), full=True)
    assert loop.resends == [False, True]
    loop, _ = _loop(session_factory, [SimpleNamespace(job_id=uuid.uuid4())])
    loop._admit(TickStats())
    assert loop.resends == [True]


class _Full(_Recording):
    """The loop's thread as it is, at its backend's limit: which passes run."""

    def run_once(self):
        self._no_room = True
        super().run_once()


def test_submits_wake_no_pass_while_the_backend_is_full():
    loop = _Full()
    loop.start()
    try:
        assert loop.kinds.get(timeout=10) == "full"
        for _ in range(3):
            loop.wake(admit_only=True)          # submits: skipped, nothing could launch
        loop.wake()                             # a cancel (a slot may free): the full pass
        assert loop.kinds.get(timeout=10) == "full"
        loop._no_room = False                   # a pass found room again
        loop.wake(admit_only=True)
        assert loop.kinds.get(timeout=10) == "admit"
    finally:
        loop.stop()
    assert loop.kinds.empty()
