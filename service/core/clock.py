"""The one wall clock of the service: timezone-aware UTC.

Persistence (column defaults) and the lifecycle (launch and settle stamps) read the same clock;
tests that move time patch the name where it is looked up (tests/fakes/harness.py).
"""

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
