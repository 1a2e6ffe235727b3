"""The controller loop's memo of the waiting jobs (capacity/waiting_memo.py, issue 51.3): a plan
read through it sees exactly what a full read sees, in the same order, on random worlds changed
between passes the way the service changes them (submits, cancels, launches, a nomination that
leaves updated_at alone, a priority rewritten, a retry's backoff, held teams, the team window),
and the scheduler decides the same; and a pass after one change reads one row whole."""
from __future__ import annotations

import itertools
import uuid
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select, update

from service.capacity import snapshot
from service.capacity.waiting_memo import WaitingMemo
from service.core.clock import utcnow
from service.persistence.models import Job, Team, TeamShare
from service.scheduling.model import Policy
from service.scheduling.scheduler import schedule
from tests.capacity.test_planner import _alpha, _jobs

TEAMS = 4
_backends = itertools.count()

op = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, TEAMS - 1), st.integers(0, 3), st.integers(1, 3), st.booleans(),
              st.integers(-30, 30)),
    st.tuples(st.just("cancel"), st.integers(0, 10_000)),
    st.tuples(st.just("launch"), st.integers(0, 10_000)),
    st.tuples(st.just("nominate"), st.integers(0, 10_000)),
    st.tuples(st.just("priority"), st.integers(0, 10_000), st.integers(0, 5)),
    st.tuples(st.just("held"), st.sets(st.integers(0, TEAMS - 1), max_size=2)),
)


def _load(session, backend, memo, held, window, capacity):
    return snapshot.load(session, backend, {backend: capacity}, max_waiting=window, max_preemptions_per_job=3,
                         grace_seconds=30, held_teams=held, memo=memo)


def _same(a: snapshot.Snapshot, b: snapshot.Snapshot) -> None:
    assert a.waiting == b.waiting
    assert (a.accepts, a.wishes) == (b.accepts, b.wishes)
    da, db = (schedule(s.arbitrated, s.shares, s.running, s.waiting, 1e9, Policy(), explain=False, served=s.served)
              for s in (a, b))
    assert [x.job_id for x in da.admit] == [x.job_id for x in db.admit]
    assert [(x.job_id, x.for_job) for x in da.preempt] == [(x.job_id, x.for_job) for x in db.preempt]


def _world(client, session_factory):
    """A submitted job to copy, and TEAMS teams with a nominal share on every backend of the test."""
    base = uuid.UUID(_jobs(client, _alpha(client), 1)[0])
    with session_factory() as s:
        row = s.execute(select(Job).where(Job.id == base)).scalar_one()
        template = {c.key: getattr(row, c.key) for c in Job.__table__.columns}
        teams = [Team(name=f"memo-{uuid.uuid4().hex[:8]}") for _ in range(TEAMS)]
        s.add_all(teams)
        s.commit()
        return template, [t.id for t in teams]


def test_the_memo_reads_what_a_full_read_reads(client, demo, session_factory):
    template, teams = _world(client, session_factory)

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(seed=st.lists(st.tuples(st.integers(0, TEAMS - 1), st.integers(0, 3), st.integers(1, 3)), min_size=6,
                         max_size=24),
           steps=st.lists(st.lists(op, max_size=4), min_size=2, max_size=6), window=st.integers(2, 8),
           capacity=st.integers(2, 8))
    def check(seed, steps, window, capacity):
        backend = f"memo{next(_backends)}"       # a world of its own: earlier examples' jobs are elsewhere
        memo = WaitingMemo()
        clock = [utcnow()]
        held: frozenset = frozenset()
        with session_factory() as s:
            for i, team in enumerate(teams[:2]):
                s.add(TeamShare(team_id=team, backend=backend, nominal={"core": 2 + i}))
            s.commit()

        def tick():
            clock[0] += timedelta(milliseconds=1)
            return clock[0]

        # A queue first, so that most passes read a few rows whole, not all (the memo's own path).
        steps = [[("submit", team, priority, cores, False, 0) for team, priority, cores in seed], *steps]
        for step in steps:
            with session_factory() as s:
                ids = list(s.execute(select(Job.id).where(Job.backend == backend, Job.state == "QUEUED",
                                                          Job.backend_ref.is_(None)).order_by(Job.id)).scalars())
                for o in step:
                    held = _apply(s, o, ids, template, teams, backend, tick, held)
                s.commit()
            with session_factory() as s:
                kept = _load(s, backend, memo, held, window, {"core": capacity})
            with session_factory() as s:
                full = _load(s, backend, None, held, window, {"core": capacity})
            _same(kept, full)
            seen["partial" if memo.last_listed and not memo.last_full else
                 "full" if memo.last_full else "unmoved"] += 1

    seen = {"partial": 0, "full": 0, "unmoved": 0}
    check()
    assert min(seen.values()) > 0, seen      # each of the memo's three paths was compared


def _apply(s, o, ids, template, teams, backend, tick, held):
    kind, *args = o
    if kind == "submit":
        team, priority, cores, may_preempt, backoff = args
        at = tick()
        s.execute(insert(Job), [template | {
            "id": uuid.uuid4(), "team_id": teams[team], "backend": backend, "state": "QUEUED", "backend_ref": None,
            "priority": priority, "may_preempt": may_preempt, "demand": {"core": cores}, "idempotency_key": None,
            "request_hash": None, "created_at": at, "updated_at": at, "nominated_at": None,
            "not_before": at + timedelta(seconds=backoff) if backoff else None}])
        return held
    if kind == "held":
        return frozenset(teams[t] for t in args[0])
    if not ids:
        return held
    job = ids[args[0] % len(ids)]
    values = {"cancel": {"state": "CANCELLED"}, "launch": {"state": "RUNNING", "backend_ref": "ref"},
              "priority": {"priority": args[-1]}}.get(kind)
    if kind == "nominate":      # as the engine's preempt() writes it: updated_at untouched
        s.execute(update(Job).where(Job.id == job).values(nominated_at=tick()))
    else:
        s.execute(update(Job).where(Job.id == job).values(**values, updated_at=tick()))
    return held


def test_a_pass_after_one_change_reads_one_row_whole(client, demo, session_factory):
    template, teams = _world(client, session_factory)
    backend = "memo-reads"
    now = utcnow()
    with session_factory() as s:
        s.execute(insert(Job), [template | {
            "id": uuid.uuid4(), "team_id": teams[i % TEAMS], "backend": backend, "state": "QUEUED",
            "idempotency_key": None, "request_hash": None, "demand": {"core": 1},
            "created_at": now + timedelta(milliseconds=i), "updated_at": now + timedelta(milliseconds=i)}
            for i in range(40)])
        s.commit()
    memo = WaitingMemo()
    with session_factory() as s:
        first = _load(s, backend, memo, frozenset(), 100, {"core": 4})
    assert (memo.last_read, memo.last_full) == (40, True)
    with session_factory() as s:
        again = _load(s, backend, memo, frozenset(), 100, {"core": 4})
    assert (memo.last_read, memo.last_full, memo.last_listed) == (0, False, False)   # nothing moved: not even listed
    assert again.waiting == first.waiting
    nominated = first.waiting[3].job_id
    with session_factory() as s:     # as the preempter writes it: updated_at untouched
        s.execute(update(Job).where(Job.id == nominated).values(nominated_at=utcnow()))
        s.commit()
    with session_factory() as s:
        after = _load(s, backend, memo, frozenset(), 100, {"core": 4})
    assert (memo.last_read, memo.last_listed) == (1, True)
    assert next(w for w in after.waiting if w.job_id == nominated).nominated
    changed = first.waiting[7].job_id
    with session_factory() as s:
        s.execute(update(Job).where(Job.id == changed).values(priority=3, updated_at=utcnow()))
        s.commit()
    with session_factory() as s:
        third = _load(s, backend, memo, frozenset(), 100, {"core": 4})
    assert (memo.last_read, memo.last_full) == (1, False)
    assert next(w for w in third.waiting if w.job_id == changed).priority == 3
    with session_factory() as s:     # the capacity's resources are part of each value: read again
        _load(s, backend, memo, frozenset(), 100, {"core": 4, "gpu": 1})
    assert memo.last_full


def test_a_job_listed_then_gone_before_its_row_is_read_is_left_out():
    """Between the listing and the read of a changed job's row, the job stopped waiting (launched,
    cancelled): the plan leaves it out, rather than keep its value from before."""
    from types import SimpleNamespace

    from service.scheduling.model import Waiting

    def row(job_id, at):
        return SimpleNamespace(id=job_id, updated_at=at, nominated_at=None, accepts=None, wish=None)

    rows = {"a": row("a", 1), "b": row("b", 1)}
    memo = WaitingMemo()

    def build(r):
        return Waiting(r.id, "t", 0, {"core": 1}, 0.0)

    def read_rows(ids):
        return [rows[i] for i in (ids if ids is not None else sorted(rows)) if i in rows]

    def waiting(listed, mark):
        return [k.waiting.job_id for k in memo.waiting("ctx", lambda: mark, lambda: listed, read_rows, build)]

    assert waiting([("a", 1, False), ("b", 1, False)], (2, 1)) == ["a", "b"]
    del rows["b"]                 # b was written (stamp 2), then left the queue before its row was read
    assert waiting([("a", 1, False), ("b", 2, False)], (2, 2)) == ["a"]
    assert memo.last_read == 0 and not memo.last_full


def test_an_unmoved_mark_is_trusted_for_relist_seconds_only(monkeypatch):
    """The mark is sums (two changes may cancel out): past RELIST_SECONDS the jobs are listed again."""
    from types import SimpleNamespace

    from service.capacity import waiting_memo
    from service.scheduling.model import Waiting

    clock = [100.0]
    monkeypatch.setattr(waiting_memo.time, "monotonic", lambda: clock[0])
    listings: list = []
    rows = [SimpleNamespace(id="a", updated_at=1, nominated_at=None, accepts=None, wish=None)]
    memo = WaitingMemo(relist_seconds=60.0)

    def read():
        return memo.waiting("ctx", lambda: (1, 1), lambda: listings.append(1) or [("a", 1, False)],
                            lambda ids: rows, lambda r: Waiting(r.id, "t", 0, {"core": 1}, 0.0))
    read()                                    # the first read: everything
    clock[0] = 159.0
    read()
    assert (memo.last_listed, listings) == (False, [])
    clock[0] = 160.0
    read()
    assert (memo.last_listed, listings) == (True, [1])
