"""The bounds of `trainjobs queue simulate` (docs/queue.md, "What if"): it reads every team's
history and replays it twice in the process that runs it. Read by the command itself
(service/cli/simulate.py), as a section of its own."""
from __future__ import annotations

from pydantic import Field

from service.core.section import Section


class SimulateEnv(Section):
    """What if: trainjobs queue simulate (service/capacity/whatif.py, docs/queue.md)."""

    simulate_max_days: int = Field(90, ge=1, le=3650, description="Days of history one `trainjobs queue simulate` "
                                   "may replay (--days)")
    simulate_max_jobs: int = Field(200_000, ge=1, le=10_000_000, description="Job rows (attempts included) "
                                   "submitted in the window that one `trainjobs queue simulate` may read; more: "
                                   "refused before anything is replayed")
    simulate_max_seconds: float = Field(300.0, gt=0, le=86_400, description="CPU seconds one `trainjobs queue "
                                        "simulate` may spend replaying (both replays together); past it the "
                                        "command stops and says how far it got")
