"""The operator's shared-capacity settings as rows: capacity per backend, team shares, priority
classes. Every change writes an audit event in its own transaction (who, what, from, to)."""
from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from service.capacity import snapshot
from service.capacity.schemas import (
    AuditEventOut,
    AuditPage,
    CapacityOut,
    PriorityClassIn,
    PriorityClassOut,
    ShareIn,
    ShareOut,
)
from service.capacity.settings import CapacitySettings
from service.core.errors import Invalid, NotFound, Problem
from service.persistence.models import AuditEvent, BackendCapacity, PriorityClass, Team, TeamShare, utcnow


def audit(session: Session, actor: str, action: str, subject: str, before: dict | None, after: dict | None) -> None:
    session.add(AuditEvent(at=utcnow(), actor=actor, action=action, subject=subject, before=before, after=after))


def _enabled(backend: str, enabled: Mapping[str, object]) -> None:
    if backend not in enabled:
        raise NotFound(f"no backend {backend!r} is enabled here; enabled: {', '.join(sorted(enabled)) or 'none'}")


def capacity(session: Session, backend: str, offered: dict[str, int], settings: CapacitySettings) -> CapacityOut:
    resources, source = snapshot.capacity_of(session, backend, settings.defaults)
    row = session.execute(select(func.max(BackendCapacity.updated_at), func.max(BackendCapacity.updated_by))
                          .where(BackendCapacity.backend == backend)).one()
    return CapacityOut(backend=backend, resources=resources, source=source, offered=offered,  # type: ignore[arg-type]
                       updated_at=row[0], updated_by=row[1])


def set_capacity(session: Session, backend: str, resources: dict[str, int], actor: str, enabled: Mapping[str, object],
                 settings: CapacitySettings) -> None:
    _enabled(backend, enabled)
    _bounded("resources", resources, settings.max_resources)
    before, _ = snapshot.capacity_of(session, backend, settings.defaults)
    _nominal_fits(session, backend, resources, settings, changing=None, nominal={})
    session.execute(delete(BackendCapacity).where(BackendCapacity.backend == backend))
    now = utcnow()
    session.add_all([BackendCapacity(backend=backend, resource=r, amount=n, updated_at=now, updated_by=actor)
                     for r, n in resources.items()])
    audit(session, actor, "capacity.set", f"backend {backend}", {"resources": before}, {"resources": resources})


def reset_capacity(session: Session, backend: str, actor: str, enabled: Mapping[str, object],
                   settings: CapacitySettings) -> None:
    _enabled(backend, enabled)
    before, source = snapshot.capacity_of(session, backend, settings.defaults)
    if source != "api":
        return
    session.execute(delete(BackendCapacity).where(BackendCapacity.backend == backend))
    audit(session, actor, "capacity.reset", f"backend {backend}", {"resources": before},
          {"resources": dict(settings.defaults.get(backend, {}))})


def _bounded(field: str, counts: Mapping[str, int], most: int) -> None:
    if len(counts) > most:
        raise Invalid.of([Problem(field, f"{len(counts)} resources; at most {most} (TRAINJOBS_CAPACITY_MAX_RESOURCES)",
                                  "name only the resources that are shared")])


def _nominal_fits(session: Session, backend: str, capacity: Mapping[str, int], settings: CapacitySettings, *,
                  changing: str | None, nominal: Mapping[str, int]) -> None:
    """The nominal quotas of all teams together fit in the capacity (a guarantee that cannot be
    kept is no guarantee): checked when either changes."""
    total: dict[str, int] = dict(nominal)
    for team, share in snapshot.shares_of(session, backend).items():
        if team != changing:
            for r, n in share.nominal.items():
                total[r] = total.get(r, 0) + n
    over = [(r, n, capacity.get(r, 0)) for r, n in sorted(total.items()) if r in capacity and n > capacity[r]]
    if over:
        raise Invalid.of([Problem("nominal", f"the teams' nominal quotas of {r} add up to {n}, more than the "
                                  f"{c} backend {backend} has (by {n - c})",
                                  "lower a team's nominal quota or raise the capacity first") for r, n, c in over])


def _team_id(session: Session, team: str):
    team_id = session.scalar(select(Team.id).where(Team.name == team))
    if team_id is None:
        raise NotFound(f"no team named {team!r}")
    return team_id


def _share_out(team: str, row: TeamShare) -> ShareOut:
    return ShareOut(team=team, backend=row.backend, nominal=row.nominal or {}, borrowing_limit=row.borrowing_limit or {},
                    lending_limit=row.lending_limit or {}, weight=row.weight, updated_at=row.updated_at,
                    updated_by=row.updated_by)


def shares(session: Session, *, team: str | None = None, backend: str | None = None) -> list[ShareOut]:
    q = select(Team.name, TeamShare).join(Team, Team.id == TeamShare.team_id).order_by(TeamShare.backend, Team.name)
    if team is not None:
        q = q.where(Team.name == team)
    if backend is not None:
        q = q.where(TeamShare.backend == backend)
    return [_share_out(name, row) for name, row in session.execute(q).all()]


def share(session: Session, team: str, backend: str) -> ShareOut:
    row = session.get(TeamShare, (_team_id(session, team), backend))
    if row is None:
        return ShareOut(team=team, backend=backend)
    return _share_out(team, row)


def set_share(session: Session, team: str, backend: str, body: ShareIn, actor: str, enabled: Mapping[str, object],
              settings: CapacitySettings) -> ShareOut:
    _enabled(backend, enabled)
    team_id = _team_id(session, team)
    for field in ("nominal", "borrowing_limit", "lending_limit"):
        _bounded(field, getattr(body, field), settings.max_resources)
    lends_more = [r for r, n in body.lending_limit.items() if n > body.nominal.get(r, 0)]
    if lends_more:
        raise Invalid.of([Problem(f"lending_limit.{r}", f"lends {body.lending_limit[r]}, more than its nominal "
                                  f"quota of {body.nominal.get(r, 0)}", "lend at most the nominal quota")
                          for r in lends_more])
    cap, _ = snapshot.capacity_of(session, backend, settings.defaults)
    _nominal_fits(session, backend, cap, settings, changing=team, nominal=body.nominal)
    row = session.get(TeamShare, (team_id, backend))
    before = None if row is None else _share_out(team, row).model_dump(mode="json", include=_SHARE_FIELDS)
    if row is None:
        row = TeamShare(team_id=team_id, backend=backend)
        session.add(row)
    row.nominal, row.borrowing_limit = dict(body.nominal), dict(body.borrowing_limit)
    row.lending_limit, row.weight = dict(body.lending_limit), body.weight
    row.updated_at, row.updated_by = utcnow(), actor
    audit(session, actor, "share.set", f"team {team} on {backend}", before, body.model_dump(mode="json"))
    session.flush()
    return _share_out(team, row)


_SHARE_FIELDS = {"nominal", "borrowing_limit", "lending_limit", "weight"}


def delete_share(session: Session, team: str, backend: str, actor: str) -> None:
    row = session.get(TeamShare, (_team_id(session, team), backend))
    if row is None:
        raise NotFound(f"team {team} has no share of backend {backend}")
    before = _share_out(team, row).model_dump(mode="json", include=_SHARE_FIELDS)
    session.delete(row)
    audit(session, actor, "share.delete", f"team {team} on {backend}", before, None)


def _class_out(row: PriorityClass, team: str) -> PriorityClassOut:
    return PriorityClassOut(name=row.name, value=row.value, preempts=row.preempts, teams=row.teams,
                            description=row.description, min_runtime_seconds=row.min_runtime_seconds,
                            usable=row.teams is None or team in row.teams, updated_at=row.updated_at,
                            updated_by=row.updated_by)


def classes(session: Session, team: str) -> list[PriorityClassOut]:
    return [_class_out(row, team) for row in session.scalars(select(PriorityClass).order_by(PriorityClass.value.desc(),
                                                                                          PriorityClass.name))]


def priority_class(session: Session, name: str, team: str) -> PriorityClassOut:
    row = session.get(PriorityClass, name)
    if row is None:
        raise NotFound(f"no priority class named {name!r}")
    return _class_out(row, team)


def set_class(session: Session, name: str, body: PriorityClassIn, actor: str, team: str,
              settings: CapacitySettings) -> PriorityClassOut:
    row = session.get(PriorityClass, name)
    before = None
    if row is None:
        count = session.scalar(select(func.count()).select_from(PriorityClass)) or 0
        if count >= settings.max_priority_classes:
            raise Invalid.of([Problem("name", f"this service has {count} priority classes, the most it allows "
                                      "(TRAINJOBS_MAX_PRIORITY_CLASSES)", "change or delete one instead")])
        row = PriorityClass(name=name)
        session.add(row)
    else:
        before = PriorityClassIn.model_validate(_class_fields(row)).model_dump(mode="json")
    row.value, row.preempts, row.description = body.value, body.preempts, body.description
    row.min_runtime_seconds = body.min_runtime_seconds
    row.teams = None if body.teams is None else sorted(set(body.teams))
    row.updated_at, row.updated_by = utcnow(), actor
    audit(session, actor, "priority_class.set", f"priority class {name}", before, body.model_dump(mode="json"))
    session.flush()
    return _class_out(row, team)


def _class_fields(row: PriorityClass) -> dict:
    return {"value": row.value, "preempts": row.preempts, "teams": row.teams, "description": row.description,
            "min_runtime_seconds": row.min_runtime_seconds}


def delete_class(session: Session, name: str, actor: str) -> None:
    """Jobs already submitted keep the priority they were given; a later submit naming the class
    is refused (422) until it exists again."""
    row = session.get(PriorityClass, name)
    if row is None:
        raise NotFound(f"no priority class named {name!r}")
    before = PriorityClassIn.model_validate(_class_fields(row)).model_dump(mode="json")
    session.delete(row)
    audit(session, actor, "priority_class.delete", f"priority class {name}", before, None)


def audit_page(session: Session, *, limit: int, before: int | None, action: str | None) -> AuditPage:
    q = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit + 1)
    if before is not None:
        q = q.where(AuditEvent.id < before)
    if action is not None:
        q = q.where(AuditEvent.action == action)
    rows = list(session.scalars(q))
    more = len(rows) > limit
    rows = rows[:limit]
    return AuditPage(items=[AuditEventOut(id=r.id, at=r.at, actor=r.actor, action=r.action, subject=r.subject,
                                          before=r.before, after=r.after) for r in rows],
                     next_before=rows[-1].id if more and rows else None)
