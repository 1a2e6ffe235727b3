"""What the app's PostgreSQL connections send, from libpq's own trace (tests/jobs: the submit's
round trips, statements and transaction commands)."""
from __future__ import annotations

import re
import tempfile

from sqlalchemy import event


class Wire:
    """What the app's connections send, from libpq's own trace, and their mode when returned."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.file = tempfile.TemporaryFile(mode="w+")
        self.returned_in_autocommit = 0
        event.listen(engine, "checkout", self._checkout)
        event.listen(engine, "checkin", self._checkin)

    def _checkout(self, dbapi_conn, _record, _proxy) -> None:
        dbapi_conn.pgconn.trace(self.file.fileno())

    def _checkin(self, dbapi_conn, _record) -> None:
        if dbapi_conn.pgconn.status == 0:       # CONNECTION_OK (a lost one is not traced)
            dbapi_conn.pgconn.untrace()
        self.returned_in_autocommit += bool(dbapi_conn.autocommit)

    def sent(self) -> str:
        self.file.flush()
        self.file.seek(0)
        text_ = self.file.read()
        self.file.seek(0)
        self.file.truncate()
        return text_

    def close(self) -> None:
        event.remove(self.engine, "checkout", self._checkout)
        event.remove(self.engine, "checkin", self._checkin)
        self.file.close()

    @staticmethod
    def messages(sent: str) -> list[str]:
        """The trace's messages, one per item: a statement's text may span lines."""
        return re.split(r"\n(?=\d{4}-\d\d-\d\d )", sent)

    def parsed(self, sent: str) -> list[str]:
        """The statements the client sent to be parsed (a prepared one is parsed once)."""
        return [m for m in self.messages(sent) if "\tParse\t" in m]

    def executes(self, sent: str) -> int:
        """How many statements were run (the extended protocol's Execute messages the client sent)."""
        return sum(1 for line in sent.splitlines() if "\tF\t" in line and "\tExecute\t" in line)
