"""A controller whose packets are dropped (not refused): a new one takes over once the
lease runs out, and the old one, back on the network, stays down (tests/faults/partition.py)."""
import os

import pytest

from tests.conftest import truncate_all
from tests.faults import netns, partition

LEASE = 4.0


@pytest.mark.postgres
@pytest.mark.slow
def test_a_partitioned_controller_is_replaced_and_stays_down(pg_database, tmp_path):
    why = netns.available()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the partition test {why}")
        pytest.skip(why)
    truncate_all(pg_database)
    figures = partition.run(pg_database, tmp_path, LEASE)
    print(figures)
    # The old controller gave up its half-open session (after half the lease) before the
    # lease ran out for the others: never two controllers at once.
    assert figures.old_down_before_new_up
    # A healthy controller's lease is never broken early (its last heartbeat was at most
    # half an election interval, 0.5 s, before the drop).
    assert figures.takeover_seconds >= LEASE - 1
