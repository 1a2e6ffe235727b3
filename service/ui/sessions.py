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
from collections.abc import Callable
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import HTTPConnection

from service.web.container import services

SESSION_COOKIE = "trainjobs_session"
LOGIN_COOKIE = "trainjobs_signin"      # before sign-in: binds the sign-in form's CSRF token
COOKIE_PATH = "/ui"
SECRET_NAME = "ui-session-key"
LOGIN_MAX_AGE = 3600

class SigningKey:
    """The key that signs the UI's cookies, read (or made) once per process:
    TRAINJOBS_UI_SESSION_SECRET if set, else one stored in the database and shared by every
    worker. Read on first use, not at start, so a process starts while the database is down."""

    def __init__(self, configured: str | None, stored: Callable[[str], str]) -> None:
        """`stored(name)`: the secret `name` kept in the database, made if missing
        (service.auth.ui_sessions.stored_secret, bound to the app's sessions)."""
        self._key = configured
        self._stored = stored
        self._lock = threading.Lock()

    def get(self) -> str:
        key = self._key
        if key:
            return key
        with self._lock:
            if not self._key:
                self._key = self._stored(SECRET_NAME)
            return self._key


def signing_key(request: HTTPConnection) -> str:
    """This process's key (SigningKey), from the app's services."""
    return services(request).ui_key.get()


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

