"""The usage ledger on real SQLite and PostgreSQL: what a recompute folds, that doing it again (a
restart, a second controller, a later pass) counts nothing twice, that a deposed controller writes
nothing, and that the planner's snapshot reads each team's decayed use."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import delete, select

from service.capacity import snapshot
from service.core.clock import utcnow
from service.lifecycle.engine import LEASE, Deposed
from service.persistence.models import ControllerLease, UsageBucket, UsageLedger
from service.persistence.session import make_engine, make_session_factory
from service.usage import store
from service.usage.billing import HOUR, bucket_age, decayed, floor_hour
from service.usage.recompute import UsageRecompute
from service.usage.settings import UsageSettings
from tests.capacity.test_planner import _alpha
from tests.usage.usagekit import HALF_LIFE, SETTINGS, buckets, fold_at, hours_ago, ran, totals


@pytest.fixture
def now():
    return floor_hour(utcnow()) + timedelta(minutes=30)


def _of(job_team, rows: dict) -> float:
    return sum(u for k, u in rows.items() if k[0] == job_team)


def _team_of(session_factory, name: str):
    with session_factory() as s:
        from service.persistence.models import Team
        return s.scalar(select(Team.id).where(Team.name == name))


def test_yesterdays_run_is_folded_by_the_hour_and_decayed(client, demo, session_factory, now):
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 26), end=hours_ago(now, 24),
        demand={"core": 2, "gpu:NVIDIA_TESLA_T4": 1})          # 2 + 10 = 12 units an hour
    fold_at(session_factory, now)
    alpha = _team_of(session_factory, "alpha")
    rows = buckets(session_factory)
    assert sorted(round(u, 6) for u in rows.values()) == [6.0, 6.0, 12.0]     # :30 to :30 over three clock hours
    assert _of(alpha, rows) == pytest.approx(24.0)
    expected = sum(decayed(u, bucket_age(h, now), HALF_LIFE) for (_, _, h), u in rows.items())
    assert totals(session_factory) == {(alpha, "local"): pytest.approx(expected)}
    assert expected == pytest.approx(24.0 / 2, rel=0.05)                      # a day ago, a one-day half-life


def test_a_recompute_done_again_counts_nothing_twice(client, demo, session_factory, now):
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 5), end=hours_ago(now, 1), demand={"core": 3})
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 2), end=None, demand={"core": 1})
    fold_at(session_factory, now)
    first, first_totals = buckets(session_factory), totals(session_factory)
    fold_at(session_factory, now)
    fold_at(session_factory, now)
    assert buckets(session_factory) == first and totals(session_factory) == first_totals
    assert sum(first.values()) == pytest.approx(4 * 3 + 2 * 1)


def test_an_ended_run_is_counted_once_across_restarts_and_later_passes(client, demo, session_factory, db_url, now):
    job = ran(client, _alpha(client), session_factory, start=hours_ago(now, 3), end=None, demand={"core": 2})
    fold_at(session_factory, now)
    assert sum(buckets(session_factory).values()) == pytest.approx(6.0)      # running: counted up to now
    from sqlalchemy import update

    from service.persistence.models import Job
    with session_factory() as s:
        s.execute(update(Job).where(Job.id == job).values(state="SUCCEEDED", ended_at=now + timedelta(minutes=30)))
        s.commit()
    for later in (2, 5, 30):     # each a new process: a fresh engine, the state read from the database
        engine = make_engine(db_url)
        try:
            restarted = make_session_factory(engine)
            service = UsageRecompute(restarted, SETTINGS, fence=None, clock=lambda h=later: now + timedelta(hours=h))
            while service.run_once():     # more than a day since the watermark: a day a pass
                pass
        finally:
            engine.dispose()
        rows = buckets(session_factory)
        assert sum(rows.values()) == pytest.approx(7.0)                      # 3.5 hours of 2 cores, once
        # The totals kept as they go (a closed part moved with the watermark) are the formula's.
        at = now + timedelta(hours=later)
        assert sum(totals(session_factory).values()) == pytest.approx(
            sum(decayed(u, bucket_age(h, at), HALF_LIFE) for (_, _, h), u in rows.items()))
    with session_factory() as s:
        assert s.scalar(select(UsageLedger.refold_from)) == floor_hour(now + timedelta(hours=30)) - HOUR


def test_the_first_recompute_folds_back_ten_half_lives_and_old_buckets_go(client, demo, session_factory, now):
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 24 * 11), end=hours_ago(now, 24 * 11 - 1),
        demand={"core": 1})
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 24 * 9), end=hours_ago(now, 24 * 9 - 1),
        demand={"core": 1})
    assert fold_at(session_factory, now) == 11                               # 10 days back, a day a pass
    assert sum(buckets(session_factory).values()) == pytest.approx(1.0)      # the 11-day-old run is past the horizon
    fold_at(session_factory, now + timedelta(days=2))
    assert buckets(session_factory) == {}                                    # now both are


def test_a_deposed_controller_writes_nothing(client, demo, session_factory, now):
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 2), end=hours_ago(now, 1), demand={"core": 1})
    with session_factory() as s:
        s.execute(delete(ControllerLease))
        s.add(ControllerLease(name=LEASE, epoch=7, holder="the new one"))
        s.commit()
    with pytest.raises(Deposed):
        UsageRecompute(session_factory, SETTINGS, fence=6, clock=lambda: now).run_once()
    assert buckets(session_factory) == {} and totals(session_factory) == {}
    leader = UsageRecompute(session_factory, SETTINGS, fence=7, clock=lambda: now)
    while leader.run_once():
        pass
    assert sum(buckets(session_factory).values()) == pytest.approx(1.0)


def test_two_controllers_recomputing_at_once_count_each_hour_once(client, demo, session_factory, db_url, now):
    """The ledger row is locked for the recompute (PostgreSQL FOR UPDATE, SQLite's one writer), and
    every hour is replaced whole: even two at once (a takeover's overlap) leave one count."""
    for i in range(4):
        ran(client, _alpha(client), session_factory, start=hours_ago(now, 6 + i), end=hours_ago(now, 1),
            demand={"core": 1})
    errors: list[BaseException] = []
    go = threading.Barrier(2)

    def one():
        engine = make_engine(db_url)
        try:
            go.wait()
            fold_at(make_session_factory(engine), now)
        except BaseException as e:   # noqa: BLE001 (reported below)
            errors.append(e)
        finally:
            engine.dispose()
    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sum(buckets(session_factory).values()) == pytest.approx(5 + 6 + 7 + 8)


def test_the_snapshot_reads_each_teams_decayed_use_over_every_backend(client, demo, session_factory, db_url, now):
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 4), end=hours_ago(now, 2), demand={"core": 1})
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 4), end=hours_ago(now, 2), demand={"core": 1},
        backend="vertex")
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 1), end=None, demand={"core": 1}, team="beta")
    fold_at(session_factory, now)
    with session_factory() as s:
        snap = snapshot.load(s, "local", {}, max_waiting=100, max_preemptions_per_job=3, grace_seconds=30,
                             now=now + timedelta(days=1))
        by_team = store.decayed_by_team(s, {_team_of(session_factory, n): n for n in ("alpha", "beta")}, now)
    assert by_team["alpha"] == pytest.approx(4.0, rel=0.1) and by_team["beta"] == pytest.approx(1.0, rel=0.05)
    # Read a day later, the same totals have halved (decayed on with the half-life the recompute used).
    assert snap.usage == {"alpha": pytest.approx(by_team["alpha"] / 2), "beta": pytest.approx(by_team["beta"] / 2)}


def test_billing_weights_decide_the_units(client, demo, session_factory, now):
    ran(client, _alpha(client), session_factory, start=hours_ago(now, 2), end=hours_ago(now, 1),
        demand={"vcpu": 8, "gpu:NVIDIA_TESLA_A100": 2})
    fold_at(session_factory, now, UsageSettings({"vcpu": 0.5, "gpu:NVIDIA_TESLA_A100": 10}, HALF_LIFE, 60))
    assert sum(buckets(session_factory).values()) == pytest.approx(24.0)
    with session_factory() as s:
        assert store.ledger(s).weights == {"vcpu": 0.5, "gpu:NVIDIA_TESLA_A100": 10}
    assert UsageBucket.__tablename__ == "usage_buckets"
