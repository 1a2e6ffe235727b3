"""Prometheus gauges of each team's use against its limits (with the metrics token only:
they tell what every team is doing, like trainjobs_jobs)."""
from __future__ import annotations

import logging
from collections.abc import Callable

from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import select

from service.budgets import service
from service.persistence.models import Team, TeamLimits


def limits_by_team(session_factory, currency: str) -> list[tuple[str, str, float, float | None]]:
    """(team, limit, use, max) for every team that has limits."""
    out = []
    with session_factory() as session:
        teams = session.execute(select(Team.id, Team.name).join(TeamLimits, TeamLimits.team_id == Team.id)).all()
        for team_id, name in teams:
            for line in service.usage(session, team_id, name, currency).limits:
                out.append((name, line.limit, float(line.use), None if line.max is None else float(line.max)))
    return out


class TeamLimitsCollector:
    def __init__(self) -> None:
        # Set by the app: () -> limits_by_team(...)
        self.source: Callable[[], list[tuple[str, str, float, float | None]]] | None = None

    def describe(self):
        return []

    def collect(self):
        use = GaugeMetricFamily("trainjobs_team_limit_use", "A team's use of a limited resource (estimates for "
                                "spend, in the price table's currency)", labels=["team", "limit"])
        cap = GaugeMetricFamily("trainjobs_team_limit_max", "A team's limit", labels=["team", "limit"])
        if self.source is not None:
            try:
                for team, limit, used, most in self.source():
                    use.add_metric([team, limit], used)
                    if most is not None:
                        cap.add_metric([team, limit], most)
            except Exception:  # the database may be down; the scrape still answers
                logging.getLogger("trainjobs.metrics").warning("team limits query failed")
        yield use
        yield cap
