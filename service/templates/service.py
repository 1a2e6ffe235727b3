"""Templates: named, versioned job specs. Versions are immutable."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from sqlalchemy import bindparam, exists, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, contains_eager

from service import jobspec
from service.auth.service import unknown_token
from service.core.errors import Conflict, Invalid, NotFound, Problem
from service.core.pagination import decode_cursor, encode_cursor
from service.persistence import pgfast
from service.persistence.models import (
    ApiToken,
    TeamLimits,
    Template,
    TemplateVersion,
    WebhookSubscription,
    utcnow,
)
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


@dataclass(frozen=True)
class Launchable:
    """What a submit needs of a template version."""

    template_id: uuid.UUID
    name: str
    version: int
    archived: bool
    prepared: jobspec.Prepared
    # Two facts the submit needs, read in the same round trip as the template's head:
    token_live: bool          # the caller's token is still unrevoked (auth.cache: a cached actor is checked here)
    team_webhooks: bool       # the team has an active webhook (else the outbox skips its own query)
    team_limited: bool        # the team has budgets (else the submit takes no limits lock)


# Built once: a statement built per call costs more than its round trip (SQLAlchemy's cache key).
_T, _TV = Template.__table__.c, TemplateVersion.__table__.c
_TOK, _HOOK, _LIM = ApiToken.__table__.c, WebhookSubscription.__table__.c, TeamLimits.__table__.c
_HEAD = select(
    _T.id, _T.name, _T.latest_version, _T.archived_at,
    exists().where(_TOK.token_hash == bindparam("token_hash"), _TOK.revoked_at.is_(None)).label("token_live"),
    exists().where(_HOOK.team_id == _T.team_id, _HOOK.paused_at.is_(None)).label("team_webhooks"),
    exists().where(_LIM.team_id == _T.team_id).label("team_limited"),
).where(_T.team_id == bindparam("team_id"), _T.name == bindparam("name"))
_VERSION = select(_TV.spec, _TV.parameters).where(
    _TV.template_id == bindparam("template_id"), _TV.version == bindparam("version"))


def for_submit(session: Session, cache: TemplateCache, team_id: uuid.UUID, name: str,
               version: int | None = None, *, token_hash: str = "") -> Launchable:
    """The submit path's template lookup: one small query for the template's current
    state (latest version, archived) — which also tells whether the token `token_hash`
    is still live and whether the team has webhooks — and the version itself parsed and
    checked only the first time this process sees it (versions are immutable).
    A revoked token raises Unauthorized here, before anything else is told."""
    conn = session.connection()
    head = pgfast.first(conn, _HEAD, {"team_id": team_id, "name": name, "token_hash": token_hash})
    if head is None:
        if token_hash:
            check_token_live(session, token_hash)
        raise NotFound(f"no template named {name!r}; GET /v1/templates lists them")
    if token_hash and not head.token_live:
        raise unknown_token()
    wanted = version or head.latest_version
    prepared = cache.get((head.id, wanted))
    if prepared is None:
        row = conn.execute(_VERSION, {"template_id": head.id, "version": wanted}).first()
        if row is None:
            raise NotFound(f"template {name!r} has no version {version}; "
                           f"versions are 1 to {head.latest_version}")
        prepared = jobspec.prepare(row.spec, row.parameters)
        cache.put((head.id, wanted), prepared)
    return Launchable(head.id, head.name, wanted, head.archived_at is not None, prepared,
                      bool(head.token_live), bool(head.team_webhooks), bool(head.team_limited))


_TOKEN_LIVE = select(exists().where(_TOK.token_hash == bindparam("token_hash"), _TOK.revoked_at.is_(None)))


def check_token_live(session: Session, token_hash: str) -> None:
    if not session.connection().execute(_TOKEN_LIVE, {"token_hash": token_hash}).scalar():
        raise unknown_token()



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
