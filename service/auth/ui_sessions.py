"""What the web UI's sign-in keeps in the database: the key that signs its cookies, made
by the first worker that needs it and shared by every worker and host of a deployment
(service/ui/sessions.py signs with it; a signed-in token is checked again on every request
by auth.authenticate.authenticate_session)."""
from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.persistence.models import ServiceSecret


def stored_secret(session_factory: sessionmaker[Session], name: str) -> str:
    """The service secret `name`; a new random one is stored if there is none yet. Its own
    short transaction: it is read once per process, on the first request that needs it."""
    with session_factory() as session:
        value = session.scalar(select(ServiceSecret.value).where(ServiceSecret.name == name))
        if value:
            return value
        session.add(ServiceSecret(name=name, value=secrets.token_urlsafe(48)))
        try:
            session.commit()
        except IntegrityError:  # another worker made it first: use theirs
            session.rollback()
        stored = session.scalar(select(ServiceSecret.value).where(ServiceSecret.name == name))
        assert stored, "a key was stored just now, by this or another worker"
        return stored
