"""GET /v1/usage and the Queue page's chart: each team's decayed use (every member sees every
team's, as the queue shows every team's use: it is what orders them), and use over time per
backend for the caller's own team (an operator: every team's)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.clock import utcnow
from service.core.errors import Forbidden, NotFound, Problem
from service.persistence.models import Team
from service.usage import store
from service.usage.schemas import Point, Series, Step, TeamUsage, UsageReport


@dataclass(frozen=True)
class Query:
    backend: str | None = None
    team: str | None = None
    hours: int = 168
    step: Step = "hour"
    limit: int = 20
    offset: int = 0


@dataclass(frozen=True)
class Caller:
    team_id: uuid.UUID
    team: str
    operator: bool


def report(session: Session, caller: Caller, q: Query, known_backends: set[str],
           now: datetime | None = None) -> UsageReport:
    ledger = store.ledger(session)
    names = dict(session.execute(select(Team.id, Team.name)).all())
    ids = {n: i for i, n in names.items()}
    _check(q, caller, ids, known_backends | {b for t in ledger.totals.values() for b in t})
    totals = {names[t]: b for t, b in ledger.totals.items() if t in names}
    totals.setdefault(caller.team, {})
    everyone = sum(sum(b.values()) for b in totals.values())
    chosen = [q.team] if q.team is not None else sorted(totals, key=lambda n: (-sum(totals[n].values()), n))
    page = chosen[q.offset:q.offset + q.limit]
    shown = {ids[n] for n in page if n in ids and (caller.operator or n == caller.team)}
    series = _series(store.buckets(session, shown, (now or utcnow()) - timedelta(hours=q.hours), q.backend),
                     names, q.step)
    teams = [TeamUsage(team=n, units=sum(_pick(totals.get(n, {}), q.backend).values()),
                       share=sum(totals.get(n, {}).values()) / everyone if everyone > 0 else 0.0,
                       backends=_pick(totals.get(n, {}), q.backend),
                       series=series.get(n, []) if ids.get(n) in shown else None) for n in page]
    more = q.offset + q.limit < len(chosen)
    return UsageReport(computed_at=ledger.computed_at, half_life_seconds=ledger.half_life_seconds,
                       billing_weights=ledger.weights, kept_hours=ledger.kept_hours, total_units=everyone,
                       teams=teams, next_offset=q.offset + q.limit if more else None)


def _check(q: Query, caller: Caller, ids: dict[str, uuid.UUID], backends: set[str]) -> None:
    if q.backend is not None and q.backend not in backends:
        raise NotFound(f"no backend {q.backend!r} is enabled here or has use in the ledger",
                       problems=[Problem("backend", "unknown backend", fix=f"one of: {', '.join(sorted(backends))}")])
    if q.team is not None and q.team not in ids:
        raise NotFound(f"no team named {q.team!r}", problems=[Problem("team", "unknown team", fix="a team's name")])
    if q.team is not None and q.team != caller.team and not caller.operator:
        raise Forbidden(f"another team's use over time is an operator's to read; GET /v1/usage without `team` "
                        f"shows every team's decayed use, and yours ({caller.team}) over time",
                        problems=[Problem("team", "not your team", fix=f"leave it out, or ask for {caller.team!r}")])


def _pick(backends: dict[str, float], backend: str | None) -> dict[str, float]:
    return dict(backends) if backend is None else {k: v for k, v in backends.items() if k == backend}


def _series(rows: list[tuple[uuid.UUID, str, datetime, float]], names: dict[uuid.UUID, str],
            step: Step) -> dict[str, list[Series]]:
    """Buckets (oldest first) summed per team, backend and step."""
    sums: dict[str, dict[str, dict[datetime, float]]] = {}
    for team_id, backend, hour, units in rows:
        at = hour if step == "hour" else hour.astimezone(UTC).replace(hour=0)
        points = sums.setdefault(names.get(team_id, "?"), {}).setdefault(backend, {})
        points[at] = points.get(at, 0.0) + units
    return {team: [Series(backend=b, points=[Point(at=at, units=u) for at, u in sorted(p.items())])
                   for b, p in sorted(by_backend.items())] for team, by_backend in sums.items()}
