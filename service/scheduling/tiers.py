"""The order rules of a pass, written once: the tiers a waiting job can be in, in the order the
scheduler takes them. scheduler.py runs them; factors.py names the tier a job is in and explains
the order with them; the API's tier names (capacity/queue_schemas.py `Tier`) are these names (a
test holds them equal). A new rule of the order is one Tier here (docs/DESIGN.md, "A new order
rule"), and the property tests (tests/scheduling/test_properties.py) hold it to the rest.

A job is in the first tier whose `holds` is true, asked when the pass reaches that tier (so the
nominal tier sees what the nominated jobs took). Inside a tier, `by_age` takes the oldest first,
whatever the team; otherwise the fair order between teams (scheduler.py `_fair_order`), then
priority and age within a team. `urgent`: the job keeps the capacity that frees for it (it must
not be overtaken) even when it does not fit now."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from service.scheduling.ledger import Ledger
from service.scheduling.model import Policy, Waiting


@dataclass
class Scene:
    """What a tier's rule may read: the pass's ledger (as it stands when asked), the jobs running
    jobs are being stopped for, the clock and the policy."""
    ledger: Ledger
    stopping_for: Mapping[Any, int]
    now: float
    policy: Policy
    _inside: dict = field(default_factory=dict)     # (team, demand) -> (ledger version, inside)

    def inside_nominal(self, job: Waiting) -> bool:
        """Would the job keep its team inside a nominal quota it has (memo per kind of job and
        ledger version: a pass over 10,000 waiting jobs asks it for each)."""
        kind = job.kind
        known = self._inside.get(kind)
        if known is None or known[0] != self.ledger.version:
            inside = bool(self.ledger.share(job.team).nominal) and self.ledger.within_nominal(job.team, job.demand)
            known = self._inside[kind] = (self.ledger.version, inside)
        return known[1]

    def starving(self, job: Waiting) -> bool:
        return self.now - job.queued_at >= self.policy.starve_after_s


@dataclass(frozen=True)
class Tier:
    name: str
    holds: Callable[[Waiting, Scene], bool]
    urgent: Callable[[Waiting, Scene], bool]
    by_age: bool = False


TIERS: tuple[Tier, ...] = (
    # The jobs running jobs were preempted for: each preemption ends in the start it was made for.
    Tier("nominated", lambda j, s: j.nominated or bool(s.stopping_for) and j.job_id in s.stopping_for,
         lambda j, s: True, by_age=True),
    # The guarantee: a job that keeps its team inside its nominal quota, wherever it stands in its team.
    Tier("nominal", lambda j, s: s.inside_nominal(j), lambda j, s: s.starving(j)),
    # Nobody starves: past Policy.starve_after_s a job keeps the capacity that frees, oldest first.
    Tier("starving", lambda j, s: s.starving(j), lambda j, s: True, by_age=True),
    # The rest, in fair order.
    Tier("fair", lambda j, s: True, lambda j, s: False),
)


def tiers_of(policy: Policy) -> tuple[Tier, ...]:
    """The policy's tiers (Policy.tiers, for a deployment or a test that adds a rule), else TIERS."""
    return policy.tiers or TIERS


def tier_of(job: Waiting, scene: Scene, tiers: tuple[Tier, ...]) -> Tier:
    """The first tier that holds the job; the last tier takes whatever no tier holds (so a rule
    set without a catch-all loses no job)."""
    return next((t for t in tiers if t.holds(job, scene)), tiers[-1])
