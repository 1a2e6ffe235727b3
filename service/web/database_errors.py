"""Which database errors mean "the database is unavailable for now" (down, restarting, a
connection dropped): answered 503 with Retry-After, as problem+json by the API
(web/problems.py) and as a page by the UI (ui/routing.py). Told apart here, at the web edge,
because such an error can come from any query, a commit or a connection checkout, not only
from a domain's service; the UI then needs no database type to tell them apart."""
from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError


def database_unavailable(exc: BaseException) -> bool:
    # An OperationalError is the server or the network; any other DBAPIError counts only when
    # it cost the connection (e.g. psycopg's broken connection, persistence/pgfast.py).
    return isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated)
