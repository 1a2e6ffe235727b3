"""A Server-Sent Events decoder (the WHATWG rules the service's stream needs),
fed one line at a time so the sync and async clients share it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    event: str
    data: str
    id: str | None


class Decoder:
    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self.last_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, line: str) -> Event | None:
        """One line without its end-of-line; returns an event when a blank line completes one.
        An event cut off by a dropped connection is never returned (no blank line came)."""
        if line == "":
            if not self._data and not self._event:
                self._id = None
                return None
            event = Event(self._event or "message", "\n".join(self._data), self._id)
            if self._id is not None:
                self.last_id = self._id
            self._event, self._data, self._id = "", [], None
            return event
        if line.startswith(":"):
            return None  # a comment: heartbeat
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None
