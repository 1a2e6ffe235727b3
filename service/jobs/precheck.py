"""The submit's pre-check: one small query for the template's current state (its id,
latest version, archived) which also tells whether the caller's token is still live, and
whether the team has webhooks and budgets — what a submit needs to know before it writes,
in one round trip. It reads auth's tokens and the webhooks' and budgets' tables, so it
lives with jobs (the submit), not templates; the version itself comes from templates."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import Table, bindparam, exists, select
from sqlalchemy.orm import Session

from service import jobspec
from service.auth.service import unknown_token
from service.core.errors import NotFound
from service.persistence import pgfast
from service.persistence.jobrows import PgGuard
from service.persistence.models import ApiToken, TeamLimits, Template, WebhookSubscription
from service.templates import service as templates
from service.templates.cache import Head, TemplateCache


@dataclass(frozen=True)
class Launchable:
    """What a submit needs of a template version."""

    template_id: uuid.UUID
    name: str
    version: int
    archived: bool
    prepared: jobspec.Prepared
    # Facts the submit needs, read in the same round trip as the template's head:
    token_live: bool          # the caller's token is still unrevoked (auth.cache: a cached actor is checked here)
    team_webhooks: bool       # the team has an active webhook (else the outbox skips its own query)
    team_limited: bool        # the team has budgets (else the submit takes no limits lock)


def _table(model: type) -> Table:
    return model.__table__  # type: ignore[attr-defined]


# Built once: a statement built per call costs more than its round trip (SQLAlchemy's cache key).
_T, _TOK = _table(Template).c, _table(ApiToken).c
_HOOK, _LIM = _table(WebhookSubscription).c, _table(TeamLimits).c
_HEAD = select(
    _T.id, _T.name, _T.latest_version, _T.archived_at,
    exists().where(_TOK.token_hash == bindparam("token_hash"), _TOK.revoked_at.is_(None)).label("token_live"),
    exists().where(_HOOK.team_id == _T.team_id, _HOOK.paused_at.is_(None)).label("team_webhooks"),
    exists().where(_LIM.team_id == _T.team_id).label("team_limited"),
).where(_T.team_id == bindparam("team_id"), _T.name == bindparam("name"))
_TOKEN_LIVE = select(exists().where(_TOK.token_hash == bindparam("token_hash"), _TOK.revoked_at.is_(None)))


def guessed(cache: TemplateCache, head: Head, version: int | None) -> Launchable | None:
    """The Launchable `head` says, to compile with before anything is read (None: the version
    is not in the cache, and reading it would come before the token's check); a job compiled
    from it is stored only under `guard(head, ...)`."""
    wanted = version or head.latest_version
    prepared = cache.get((head.template_id, wanted))
    if prepared is None:
        return None
    return Launchable(head.template_id, head.name, wanted, False, prepared, True, False, False)


def guard(head: Head, team_id: uuid.UUID, token_hash: str) -> PgGuard:
    """What for_submit would read, as a condition for the job-row writer's statement: the
    template is still `head` (same id, name and latest version, not archived), the caller's
    token is still live, and the team still has no active webhook and no budgets. False, and
    nothing is written: the submit then runs in order, pre-check first (jobs.submitter)."""
    params: dict = {"guard_template_id": head.template_id, "guard_team_id": team_id, "guard_name": head.name,
                    "guard_latest": head.latest_version}
    token = ""
    if token_hash:
        params["guard_token_hash"] = token_hash
        token = _GUARD_TOKEN
    return PgGuard(_GUARD + token, params)


_GUARD = (
    f"EXISTS (SELECT 1 FROM {_table(Template).name} WHERE id = :guard_template_id AND team_id = :guard_team_id "
    "AND name = :guard_name AND latest_version = :guard_latest AND archived_at IS NULL) "
    f"AND NOT EXISTS (SELECT 1 FROM {_table(WebhookSubscription).name} WHERE team_id = :guard_team_id "
    "AND paused_at IS NULL) "
    f"AND NOT EXISTS (SELECT 1 FROM {_table(TeamLimits).name} WHERE team_id = :guard_team_id)")
_GUARD_TOKEN = (f" AND EXISTS (SELECT 1 FROM {_table(ApiToken).name} WHERE token_hash = :guard_token_hash "
                "AND revoked_at IS NULL)")


def for_submit(session: Session, cache: TemplateCache, team_id: uuid.UUID, name: str,
               version: int | None = None, *, token_hash: str = "") -> Launchable:
    """The template version to launch, and the facts above; the version parsed and checked
    only the first time this process sees it (templates.prepared_version: versions are
    immutable). A revoked token `token_hash` raises Unauthorized here, before anything
    else is told."""
    head = pgfast.first(session.connection(), _HEAD, {"team_id": team_id, "name": name, "token_hash": token_hash})
    if head is None:
        if token_hash:
            check_token_live(session, token_hash)
        raise NotFound(f"no template named {name!r}; GET /v1/templates lists them")
    if token_hash and not head.token_live:
        raise unknown_token()
    plain = head.archived_at is None and not head.team_webhooks and not head.team_limited
    cache.keep_head(team_id, name, Head(head.id, head.name, head.latest_version) if plain else None)
    wanted = version or head.latest_version
    prepared = templates.prepared_version(session, cache, head.id, name, wanted, head.latest_version)
    return Launchable(head.id, head.name, wanted, head.archived_at is not None, prepared,
                      bool(head.token_live), bool(head.team_webhooks), bool(head.team_limited))


def check_token_live(session: Session, token_hash: str) -> None:
    """Unauthorized unless the token is still unrevoked (a cached actor's: auth.cache)."""
    if not session.connection().execute(_TOKEN_LIVE, {"token_hash": token_hash}).scalar():
        raise unknown_token()
