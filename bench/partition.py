"""Partition takeover: the time from dropping every packet of the controller (a real
`trainjobs serve` in a network namespace of its own, nftables DROP: its TCP
connections stay half-open, PostgreSQL keeps its session) to a new controller's
first pass, on the default lease (TRAINJOBS_CONTROLLER_LEASE_SECONDS=10).

  takeover    the drop -> the other process holds the controller lock (/readyz)
  first pass  the drop -> the new controller's first pass ended (/metrics)
  step-down   the drop -> the old controller logged its step-down (it gives up its
              session after half the lease, before anyone may take over)

Needs root, iproute2, nftables and the PostgreSQL of the tests (127.0.0.1:5432).
The scenario is tests/faults/partition.py (the test runs it on a 4 s lease).
Run: .venv/bin/python bench/partition.py [--runs 3] [--lease 10]"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.persistence import migrate  # noqa: E402
from tests.faults import netns, partition  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lease", type=float, default=10.0)
    args = ap.parse_args()
    why = netns.available()
    if why:
        sys.exit(f"bench/partition.py {why}")
    name = f"trainjobs_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    try:
        migrate.upgrade(url)
        rows = []
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="trainjobs-bench-partition-") as work:
                Path(work).chmod(0o711)
                from tests.conftest import truncate_all
                truncate_all(url)
                f = partition.run(url, Path(work), args.lease)
            rows.append(f)
            print(f"run {i + 1}: takeover {f.takeover_seconds:.1f} s, first pass {f.first_pass_seconds:.1f} s, "
                  f"old stepped down {f.old_stepped_down_seconds:.1f} s (before the takeover: "
                  f"{f.old_down_before_new_up})", flush=True)
        for label, key in (("takeover", "takeover_seconds"), ("first pass", "first_pass_seconds"),
                           ("step-down", "old_stepped_down_seconds")):
            values = [getattr(r, key) for r in rows]
            print(f"{label:>10}: median {statistics.median(values):.1f} s, max {max(values):.1f} s "
                  f"(lease {args.lease:g} s, goal <= 30 s from the drop to the first pass)")
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
