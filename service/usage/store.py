"""The usage ledger's rows (persistence/models.py: usage_buckets, usage_totals, usage_ledger) as
the readers see them: each team's decayed use for fair share (one query, on every admission pass),
and the hourly series GET /v1/usage and the Queue page chart. Only recompute.py writes them."""
from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.persistence.models import UsageBucket, UsageLedger, UsageTotal
from service.usage.billing import HORIZON_HALF_LIVES, decayed

LEDGER = "ledger"


def decayed_by_team(session: Session, names: Mapping[uuid.UUID, str], now: datetime) -> dict[str, float]:
    """Each team's decayed use over every backend, decayed on from the last recompute to `now`
    with the half-life it used (so a reader needs no setting); teams with none are left out."""
    rows = session.execute(
        select(UsageTotal.team_id, func.sum(UsageTotal.units), UsageLedger.computed_at, UsageLedger.half_life_seconds)
        .join(UsageLedger, UsageLedger.name == LEDGER)
        .group_by(UsageTotal.team_id, UsageLedger.computed_at, UsageLedger.half_life_seconds)).all()
    out = {}
    for team_id, units, at, half_life in rows:
        name = names.get(team_id)
        if name is not None and units and units > 0:
            out[name] = decayed(float(units), (now - at).total_seconds(), float(half_life))
    return out


@dataclass
class Ledger:
    """What the last recompute left: when, with what half-life and weights, and the decayed
    totals per team id and backend as of then."""
    computed_at: datetime | None = None
    half_life_seconds: float | None = None
    weights: dict[str, float] = field(default_factory=dict)
    totals: dict[uuid.UUID, dict[str, float]] = field(default_factory=dict)

    @property
    def kept_hours(self) -> int:
        """How far back buckets are kept (HORIZON_HALF_LIVES half-lives), in hours."""
        return int(HORIZON_HALF_LIVES * (self.half_life_seconds or 0) // 3600)


def ledger(session: Session) -> Ledger:
    row = session.execute(select(UsageLedger).where(UsageLedger.name == LEDGER)).scalar_one_or_none()
    if row is None:
        return Ledger()
    out = Ledger(row.computed_at, row.half_life_seconds, dict(row.weights or {}))
    for team_id, backend, units in session.execute(select(UsageTotal.team_id, UsageTotal.backend, UsageTotal.units)):
        out.totals.setdefault(team_id, {})[backend] = float(units)
    return out


def buckets(session: Session, team_ids: Collection[uuid.UUID], since: datetime,
            backend: str | None = None) -> list[tuple[uuid.UUID, str, datetime, float]]:
    """The hourly buckets of these teams since `since` (oldest first)."""
    if not team_ids:
        return []
    query = (select(UsageBucket.team_id, UsageBucket.backend, UsageBucket.hour, UsageBucket.units)
             .where(UsageBucket.team_id.in_(list(team_ids)), UsageBucket.hour >= since - timedelta(hours=1)))
    if backend is not None:
        query = query.where(UsageBucket.backend == backend)
    return [(t, b, h, float(u)) for t, b, h, u in session.execute(query.order_by(UsageBucket.hour)) if h >= since]
