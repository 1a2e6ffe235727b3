"""Templates: named, versioned job specs. Versions are immutable."""
from __future__ import annotations

import re
import uuid

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, contains_eager

from service import jobspec
from service.core.errors import Conflict, Invalid, NotFound, Problem
from service.core.pagination import decode_cursor, encode_cursor
from service.persistence.models import Template, TemplateVersion, utcnow
from service.templates.cache import TemplateCache
from service.templates.schemas import (
    TEMPLATE_NAME_PATTERN,
    TemplateBody,
    TemplateCreate,
)


def _dump(body: TemplateBody) -> tuple[dict, list[dict]]:
    spec = body.spec.model_dump(mode="json", exclude_none=True)
    params = [p.model_dump(mode="json", exclude_none=True) for p in body.parameters]
    jobspec.check_template(spec, params)
    return spec, params


def preview(body: TemplateCreate) -> tuple[dict, list[dict]]:
    """The spec and parameters as `create` would store them, checked the same way; nothing stored."""
    return _dump(body)


def create(session: Session, team_id: uuid.UUID, body: TemplateCreate, actor: str) -> TemplateVersion:
    spec, params = _dump(body)
    if session.scalar(select(Template.id).where(Template.team_id == team_id, Template.name == body.name)):
        raise Conflict(f"a template named {body.name!r} exists already; "
                       f"PUT /v1/templates/{body.name} to add a version")
    template = Template(team_id=team_id, name=body.name, latest_version=1)
    version = TemplateVersion(template=template, version=1, description=body.description,
                              spec=spec, parameters=params, created_by=actor)
    session.add_all([template, version])
    try:
        session.flush()
    except IntegrityError:  # lost a race with a create of the same name
        session.rollback()
        raise Conflict(f"a template named {body.name!r} exists already") from None
    return version


def get_template(session: Session, team_id: uuid.UUID, name: str, *, for_update: bool = False) -> Template:
    q = select(Template).where(Template.team_id == team_id, Template.name == name)
    if for_update:
        q = q.with_for_update()
    template = session.scalar(q)
    if template is None:
        raise NotFound(f"no template named {name!r}; GET /v1/templates lists them")
    return template


def get_version(session: Session, team_id: uuid.UUID, name: str, version: int | None = None) -> TemplateVersion:
    # One round trip on the submit path: the version row joined to its template.
    wanted = TemplateVersion.version == (version if version else Template.latest_version)
    tv = session.scalar(select(TemplateVersion).join(Template)
                        .where(Template.team_id == team_id, Template.name == name, wanted)
                        .options(contains_eager(TemplateVersion.template)))
    if tv is not None:
        return tv
    template = get_template(session, team_id, name)  # 404 if the template itself is missing
    raise NotFound(f"template {name!r} has no version {version}; versions are 1 to {template.latest_version}")


# Built once: a statement built per call costs more than its round trip (SQLAlchemy's cache key).
_TV = TemplateVersion.__table__.c
_VERSION = select(_TV.spec, _TV.parameters).where(
    _TV.template_id == bindparam("template_id"), _TV.version == bindparam("version"))


def prepared_version(session: Session, cache: TemplateCache, template_id: uuid.UUID, name: str, version: int,
                     latest: int) -> jobspec.Prepared:
    """Version `version` of the template (`latest`: its newest, for the 404's text), parsed
    and checked only the first time this process sees it (versions are immutable). The
    submit reads the template's head first (jobs.precheck)."""
    prepared = cache.get((template_id, version))
    if prepared is None:
        row = session.connection().execute(_VERSION, {"template_id": template_id, "version": version}).first()
        if row is None:
            raise NotFound(f"template {name!r} has no version {version}; versions are 1 to {latest}")
        prepared = jobspec.prepare(row.spec, row.parameters)
        cache.put((template_id, version), prepared)
    return prepared


def update(session: Session, team_id: uuid.UUID, name: str, body: TemplateBody, actor: str) -> TemplateVersion:
    spec, params = _dump(body)
    template = get_template(session, team_id, name, for_update=True)
    if template.archived_at is not None:
        raise Conflict(f"template {name!r} is archived; POST /v1/templates/{name}/unarchive first")
    template.latest_version += 1
    template.updated_at = utcnow()
    version = TemplateVersion(template=template, version=template.latest_version,
                              description=body.description, spec=spec, parameters=params, created_by=actor)
    session.add(version)
    try:
        session.flush()
    except IntegrityError:  # two updates at once on a database without row locks
        session.rollback()
        raise Conflict(f"template {name!r} was updated at the same time; retry") from None
    return version


def set_archived(session: Session, team_id: uuid.UUID, name: str, archived: bool) -> TemplateVersion:
    template = get_template(session, team_id, name)
    if archived and template.archived_at is None:
        template.archived_at = utcnow()
    elif not archived:
        template.archived_at = None
    return get_version(session, team_id, name)


def list_templates(session: Session, team_id: uuid.UUID, *, include_archived: bool, limit: int,
                   cursor: str | None):
    """(template, its latest version's description) pairs, by name, and the next cursor."""
    latest = (TemplateVersion.template_id == Template.id) & (TemplateVersion.version == Template.latest_version)
    q = (select(Template, TemplateVersion.description).join(TemplateVersion, latest)
         .where(Template.team_id == team_id).order_by(Template.name).limit(limit + 1))
    if not include_archived:
        q = q.where(Template.archived_at.is_(None))
    if cursor:
        (after,) = decode_cursor(cursor, 1)
        if not re.match(TEMPLATE_NAME_PATTERN, after):
            raise Invalid.of([Problem("cursor", "not a cursor this service handed out",
                                      "pass next_cursor from the previous page unchanged, or omit it")])
        q = q.where(Template.name > after)
    rows = session.execute(q).all()
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (encode_cursor(rows[-1][0].name) if more else None)


def list_versions(session: Session, team_id: uuid.UUID, name: str) -> list[TemplateVersion]:
    template = get_template(session, team_id, name)
    return list(session.scalars(select(TemplateVersion).where(TemplateVersion.template_id == template.id)
                                .order_by(TemplateVersion.version)))
