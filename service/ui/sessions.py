"""UI sign-in: a signed session cookie that names the API token it was opened with,
and CSRF tokens bound to it.

The cookie holds the token's id and a random nonce, never the token itself; every
request loads the token again, so a revoked token ends its UI sessions at once.
The signing key is TRAINJOBS_UI_SESSION_SECRET, or else one generated on first use
and kept in the database, so every worker and host of a deployment shares it."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import uuid
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.auth.service import Actor
from service.persistence.models import ApiToken, ServiceSecret, Team

SESSION_COOKIE = "trainjobs_session"
LOGIN_COOKIE = "trainjobs_signin"      # before sign-in: binds the sign-in form's CSRF token
COOKIE_PATH = "/ui"
SECRET_NAME = "ui-session-key"
LOGIN_MAX_AGE = 3600

_lock = threading.Lock()


def signing_key(app) -> str:
    """The key, read (or made) once per process."""
    key = getattr(app.state, "ui_signing_key", None)
    if key:
        return key
    with _lock:
        key = getattr(app.state, "ui_signing_key", None)
        if not key:
            configured = app.state.settings.ui_session_secret
            key = configured.get_secret_value() if configured else _stored_key(app.state.session_factory)
            app.state.ui_signing_key = key
    return key


def _stored_key(session_factory) -> str:
    with session_factory() as session:
        value = session.scalar(select(ServiceSecret.value).where(ServiceSecret.name == SECRET_NAME))
        if value:
            return value
        session.add(ServiceSecret(name=SECRET_NAME, value=secrets.token_urlsafe(48)))
        try:
            session.commit()
        except IntegrityError:  # another worker made it first: use theirs
            session.rollback()
        return session.scalar(select(ServiceSecret.value).where(ServiceSecret.name == SECRET_NAME))


@dataclass(frozen=True)
class SessionData:
    token_id: uuid.UUID
    nonce: str


def _serializer(key: str, salt: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(key, salt=salt)


def new_session(key: str, token_id: uuid.UUID) -> str:
    return _serializer(key, "trainjobs.ui.session").dumps({"t": str(token_id), "n": secrets.token_urlsafe(16)})


def read_session(key: str, value: str | None, max_age: int) -> SessionData | None:
    if not value or len(value) > 1024:
        return None
    try:
        data = _serializer(key, "trainjobs.ui.session").loads(value, max_age=max_age)
        return SessionData(uuid.UUID(data["t"]), str(data["n"]))
    except (BadSignature, KeyError, TypeError, ValueError):
        return None


def new_login_nonce(key: str) -> tuple[str, str]:
    """A fresh sign-in nonce and the signed cookie value that carries it."""
    nonce = secrets.token_urlsafe(16)
    return nonce, _serializer(key, "trainjobs.ui.signin").dumps(nonce)


def read_login_nonce(key: str, value: str | None) -> str | None:
    if not value or len(value) > 512:
        return None
    try:
        return str(_serializer(key, "trainjobs.ui.signin").loads(value, max_age=LOGIN_MAX_AGE))
    except BadSignature:
        return None


def csrf_token(key: str, nonce: str) -> str:
    return hmac.new(key.encode(), f"csrf:{nonce}".encode(), hashlib.sha256).hexdigest()


def csrf_ok(key: str, nonce: str | None, sent: object) -> bool:
    # Bytes: compare_digest refuses str with non-ASCII characters (a TypeError, once a 500 for any
    # form posted with such a token).
    if not nonce or not isinstance(sent, str):
        return False
    return hmac.compare_digest(csrf_token(key, nonce).encode(), sent.encode("utf-8", "surrogatepass"))


def actor_of(session: Session, token_id: uuid.UUID) -> Actor | None:
    """The token's caller, if the token still exists and is not revoked."""
    row = session.execute(
        select(ApiToken.id, ApiToken.name, ApiToken.role, ApiToken.team_id, Team.name)
        .join(Team, Team.id == ApiToken.team_id)
        .where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))).first()
    if row is None:
        return None
    return Actor(token_id=row[0], token_name=row[1], role=row[2], team_id=row[3], team=row[4])
