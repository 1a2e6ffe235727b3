"""The submit's pre-check: one small query for the template's current state (its id,
latest version, archived) which also tells whether the caller's token is still live, and
whether the team has webhooks and budgets — what a submit needs to know before it writes,
in one round trip. It reads auth's tokens and the webhooks' and budgets' tables, so it
lives with jobs (the submit), not templates; the version itself comes from templates."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import and_, bindparam, exists, select
from sqlalchemy.orm import Session

from service import jobspec
from service.auth.service import unknown_token
from service.core.errors import NotFound
from service.persistence import pgfast
from service.persistence.jobrows import Guard
from service.persistence.models import ApiToken, TeamLimits, Template, WebhookSubscription
from service.persistence.rows import table_of
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


# The facts a submit reads before it writes, each written once, as expressions over the template
# row: the head read selects them, and a guessed submit's guard requires them where it writes.
# Built once: a statement built per call costs more than its round trip (SQLAlchemy's cache key).
_T, _TOK = table_of(Template).c, table_of(ApiToken).c
_HOOK, _LIM = table_of(WebhookSubscription).c, table_of(TeamLimits).c
_TOKEN_LIVE = exists().where(_TOK.token_hash == bindparam("head_token_hash"), _TOK.revoked_at.is_(None))
# A head is kept, and a guess stored, only while each of these is false (`plain`).
_UNPLAIN = {
    "archived": _T.archived_at.is_not(None),
    "team_webhooks": exists().where(_HOOK.team_id == _T.team_id, _HOOK.paused_at.is_(None)),
    "team_limited": exists().where(_LIM.team_id == _T.team_id),
}
_NAMED = (_T.team_id == bindparam("head_team_id"), _T.name == bindparam("head_name"))
_HEAD = select(_T.id, _T.name, _T.latest_version, _TOKEN_LIVE.label("token_live"),
               *(fact.label(name) for name, fact in _UNPLAIN.items())).where(*_NAMED)
_TOKEN_LIVE_ALONE = select(_TOKEN_LIVE)
# The head still as kept: the same template at the same latest version, and still plain.
_SAME_HEAD = exists().where(*_NAMED, _T.id == bindparam("head_template_id"),
                            _T.latest_version == bindparam("head_latest"), *(~fact for fact in _UNPLAIN.values()))
_GUARD, _GUARD_TOKEN = _SAME_HEAD, and_(_SAME_HEAD, _TOKEN_LIVE)


def guessed(cache: TemplateCache, head: Head, version: int | None) -> Launchable | None:
    """The Launchable `head` says, to compile with before anything is read (None: the version
    is not in the cache, and reading it would come before the token's check); a job compiled
    from it is stored only under `guard(head, ...)`."""
    wanted = version or head.latest_version
    prepared = cache.get((head.template_id, wanted))
    if prepared is None:
        return None
    return Launchable(head.template_id, head.name, wanted, False, prepared, True, False, False)


def guard(head: Head, team_id: uuid.UUID, token_hash: str) -> Guard:
    """What for_submit would read, as the condition of the job-row writer's statement: the
    template is still `head` (same id, name and latest version, not archived), the caller's
    token is still live, and the team still has no active webhook and no budgets. False, and
    nothing is written: the submit then runs in order, pre-check first (jobs.submitter)."""
    params: dict = {"head_template_id": head.template_id, "head_team_id": team_id, "head_name": head.name,
                    "head_latest": head.latest_version}
    if not token_hash:
        return Guard(_GUARD, params)
    params["head_token_hash"] = token_hash
    return Guard(_GUARD_TOKEN, params)


def for_submit(session: Session, cache: TemplateCache, team_id: uuid.UUID, name: str,
               version: int | None = None, *, token_hash: str = "", known: Launchable | None = None) -> Launchable:
    """The template version to launch, and the facts above; the version parsed and checked
    only the first time this process sees it (templates.prepared_version: versions are
    immutable; `known`: a version already in hand, a missed guess's). A revoked token
    `token_hash` raises Unauthorized here, before anything else is told."""
    head = pgfast.first(session.connection(), _HEAD, {"head_team_id": team_id, "head_name": name,
                                                      "head_token_hash": token_hash})
    if head is None:
        if token_hash:
            check_token_live(session, token_hash)
        raise NotFound(f"no template named {name!r}; GET /v1/templates lists them")
    if token_hash and not head.token_live:
        raise unknown_token()
    plain = not any(getattr(head, fact) for fact in _UNPLAIN)
    cache.keep_head(team_id, name, Head(head.id, head.name, head.latest_version) if plain else None)
    wanted = version or head.latest_version
    if known is not None and (known.template_id, known.version) == (head.id, wanted):
        prepared = known.prepared
    else:
        prepared = templates.prepared_version(session, cache, head.id, name, wanted, head.latest_version)
    return Launchable(head.id, head.name, wanted, bool(head.archived), prepared,
                      bool(head.token_live), bool(head.team_webhooks), bool(head.team_limited))


def check_token_live(session: Session, token_hash: str) -> None:
    """Unauthorized unless the token is still unrevoked (a cached actor's: auth.cache)."""
    if not session.connection().execute(_TOKEN_LIVE_ALONE, {"head_token_hash": token_hash}).scalar():
        raise unknown_token()
