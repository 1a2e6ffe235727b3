"""The controller lock is a lease (service/lifecycle/leader.py): a session silent for
longer than the lease is terminated by the next candidate; a live one never is."""

import pytest

from service.lifecycle.leader import PostgresLeadership
from tests.conftest import truncate_all
from tests.waiting import wait_for

LEASE = 3.0

pytestmark = pytest.mark.postgres


@pytest.fixture
def url(pg_database):
    truncate_all(pg_database)
    return pg_database


def test_a_silent_holder_is_terminated_once_the_lease_has_run_out(url):
    holder, candidate = PostgresLeadership(url, lease_seconds=LEASE), PostgresLeadership(url, lease_seconds=LEASE)
    try:
        first = holder.try_acquire()
        assert first is not None
        assert candidate.try_acquire() is None   # the holder was just heard from
        # The holder says nothing more (its packets are lost); the candidate keeps trying.
        # (the epoch in a tuple: a term's number is the result, and any number counts)
        [second] = wait_for(lambda: (epoch := candidate.try_acquire()) is not None and (epoch,),
                            "the candidate to break the lease", LEASE * 5, 0.2)
        assert second > first
        assert holder.check(0.1, lambda _: None) is False   # its session is gone: it steps down
    finally:
        holder.release()
        candidate.release()


def test_a_holder_that_keeps_its_heartbeat_keeps_the_lock(url):
    holder, candidate = PostgresLeadership(url, lease_seconds=LEASE), PostgresLeadership(url, lease_seconds=LEASE)
    try:
        assert holder.try_acquire() is not None
        # Twice the lease, with the controller's heartbeat (check) in between: never broken.
        for _ in range(int(LEASE * 2 / 0.5)):
            assert holder.check(0.5, lambda _: None)
            assert candidate.try_acquire() is None
    finally:
        holder.release()
        candidate.release()


def test_the_lock_session_gives_up_on_silence_at_both_ends(url):
    leadership = PostgresLeadership(url, lease_seconds=10)
    try:
        assert leadership.try_acquire() is not None
        show = lambda name: leadership.conn.execute(f"SHOW {name}").fetchone()[0]  # noqa: E731
        # The server's side: per-session settings sent at connect (half the lease).
        assert show("tcp_user_timeout") == "5000"   # ms
        assert show("tcp_keepalives_idle") == "2"
        assert show("tcp_keepalives_interval") == "1"
        assert show("tcp_keepalives_count") == "3"
        # The client's side (libpq's connection parameters).
        assert "tcp_user_timeout=5000" in leadership.conn.info.dsn
    finally:
        leadership.release()


def test_the_lease_is_a_bounded_setting():
    from pydantic import ValidationError

    from service.slices import Settings
    assert Settings().controller_lease_seconds == 10
    for bad in (0, 1, 10_000):
        with pytest.raises(ValidationError):
            Settings(controller_lease_seconds=bad)
