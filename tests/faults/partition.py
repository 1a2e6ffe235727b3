"""The partition scenario, shared by tests/faults/test_partition.py and bench/partition.py.

Two real `trainjobs serve` processes on one PostgreSQL database. The first runs in a
network namespace of its own (tests/faults/netns.py) and reaches the database through
a relay; it becomes the controller. The second runs here, straight on the database.
Then every packet between the first and the relay is dropped: its TCP connections
stay half-open and PostgreSQL still sees its session (the relay's side is healthy).
The second must take over once the lease has run out; the first, when its network
comes back, must have stepped down and must not take the lease back."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

from tests.faults.netns import NetNs
from tests.servekit import Serve
from tests.waiting import wait_for


@dataclass
class Figures:
    lease_seconds: float
    takeover_seconds: float      # the drop -> the new controller holds the lock
    first_pass_seconds: float    # the drop -> the new controller's first pass ended
    old_stepped_down_seconds: float   # the drop -> the old controller logged its step-down (its log's clock)
    old_down_before_new_up: bool   # by the two processes' logs (one clock, one host)


def lease_row(url: str) -> tuple[int, str]:
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        epoch, holder = conn.execute("SELECT epoch, holder FROM controller_leases WHERE name = 'controller'").fetchone()
    return int(epoch), holder


def controller_sessions(url: str) -> int:
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name = 'trainjobs-controller'").fetchone()[0]


def ticks(serve: Serve) -> float:
    """The process's finished controller passes (trainjobs_reconcile_ticks_total)."""
    for line in httpx.get(serve.url + "/metrics", timeout=5).text.splitlines():
        if line.startswith("trainjobs_reconcile_ticks_total "):
            return float(line.split()[1])
    return 0.0


def run(pg_url: str, work: Path, lease_seconds: float) -> Figures:
    url = make_url(pg_url)
    # JSON log lines: their `ts` (UTC, milliseconds) says when the controllers changed hands.
    env = {"TRAINJOBS_CONTROLLER_LEASE_SECONDS": str(lease_seconds), "TRAINJOBS_ELECTION_INTERVAL_SECONDS": "1",
           "TRAINJOBS_LOCAL_WORK_DIR": str(work / "runs"), "TRAINJOBS_LOG_FORMAT": "json"}
    ns = NetNs()
    old = new = None
    try:
        relay = ns.relay(url.port or 5432)
        inside = url.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False)
        old = Serve(work / "old", {**env, "TRAINJOBS_DATABASE_URL": inside}, name="old", wrap=ns.command([]),
                    log_level="info")  # the controllers' hand-overs are INFO lines
        # Its HTTP port is in the namespace: reach it through a relay of our own (not dropped).
        old.url = f"http://127.0.0.1:{ns.expose(old.port).port}"
        old.client = httpx.Client(base_url=old.url, timeout=30)
        old.ready()
        wait_for(old.is_controller, "the namespaced process to become the controller", 60)
        old_epoch, old_holder = lease_row(pg_url)

        new = Serve(work / "new", {**env, "TRAINJOBS_DATABASE_URL": pg_url}, name="new", log_level="info").ready()
        assert not new.is_controller() and old.is_controller()   # one controller while all is well

        ns.drop(relay.port)
        dropped_at, dropped_wall = time.monotonic(), datetime.now(UTC)   # the log lines' ts: UTC
        wait_for(new.is_controller, "a new controller after the partition", lease_seconds * 3 + 30, 0.05)
        took = time.monotonic() - dropped_at
        wait_for(lambda: ticks(new) >= 1, "the new controller's first pass", 30, 0.05)
        first_pass = time.monotonic() - dropped_at
        epoch, holder = lease_row(pg_url)
        assert epoch > old_epoch and holder != old_holder, (epoch, holder, old_holder)

        # The old controller gave up its half-open session by itself (tcp_user_timeout).
        try:
            wait_for(lambda: "stopped being the controller" in old.log(), "the old controller to step down",
                       lease_seconds * 3 + 30, 0.05)
        except AssertionError as e:
            raise AssertionError(f"{e}; its log: {old.log()[-3000:]}") from None
        stepped_down = (log_time(old.log(), "stopped being the controller") - dropped_wall).total_seconds()
        assert not old.is_controller()

        # Its network comes back: it stays down, and the lease is untouched (fencing: its
        # loops' late writes carry the old epoch and change nothing).
        ns.undrop()
        base = len(old.log())
        # Its election thread is back on the database: a second controller session (the
        # first is the new controller's, holding the lock) that did not get the lock.
        wait_for(lambda: controller_sessions(pg_url) >= 2, "the old process standing for election again", 60, 0.1)
        wait_for(lambda: _answers(old), "the old process's readiness", 60, 0.1)
        assert not old.is_controller()
        assert lease_row(pg_url) == (epoch, holder)
        assert new.is_controller()
        assert "now the controller" not in old.log()[base:]
        down_at = log_time(old.log(), "stopped being the controller")
        up_at = log_time(new.log(), "now the controller")
        return Figures(lease_seconds, took, first_pass, stepped_down, down_at < up_at)
    finally:
        for s in (old, new):
            if s is not None:
                s.stop()
        ns.close()


def log_time(text: str, needle: str) -> datetime:
    """When the last log line holding `needle` was written (its JSON `ts`, UTC)."""
    lines = [line for line in text.splitlines() if needle in line and line.startswith("{")]
    assert lines, [line for line in text.splitlines() if needle in line]
    line = lines[-1]
    return datetime.fromisoformat(json.loads(line)["ts"].replace("Z", "+00:00"))


def _answers(serve: Serve) -> bool:
    try:
        return httpx.get(serve.url + "/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
