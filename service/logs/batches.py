"""Log lines in batches of bounded bytes, as the shared readers (service/logs/fanout.py) hand
them to followers: a streamed line cut at TRAINJOBS_LOGS_STREAM_LINE_MAX_BYTES with a visible
marker, at most READ_BATCHES batches of TRAINJOBS_LOGS_STREAM_BATCH_BYTES a read, each one
ready SSE bytes shared by every follower; and the settings those bounds come from."""
from __future__ import annotations

from dataclasses import dataclass

from service.lifecycle.protocol import Backend, LogPage
from service.logs.service import JobView, _event, log_event, read

READ_BATCHES = 4  # batches one read of a shared reader hands out at most


@dataclass(frozen=True)
class FanoutSettings:
    min_interval: float = 0.1       # between reads while lines keep coming
    max_interval: float = 0.5       # the ceiling while nothing is new
    state_every: float = 0.5        # how often the job's state is checked
    heartbeat: float = 15.0         # an SSE comment after this long without an event
    buffer_lines: int = 20_000      # recent lines a reader keeps for followers who join
    follower_lines: int = 10_000    # unsent lines a follower may lag before it is cut
    idle_seconds: float = 5.0       # a reader with no follower stops after this long
    wake_chunk: int = 8             # followers woken per event-loop turn when a batch goes out
    loop_share: float = 0.1         # the most of the loop's time a reader spends fanning out (next_read_after)
    buffer_bytes: int = 4 << 20     # recent events a reader keeps, in bytes as sent
    follower_bytes: int = 1 << 20   # unsent bytes a follower may lag by
    process_bytes: int = 64 << 20   # all readers' and followers' bytes together
    line_max_bytes: int = 16_384    # a streamed line is cut past this (as sent)
    batch_bytes: int = 128 << 10    # one batch of events; a read hands out at most READ_BATCHES
    max_seconds: float = 300.0      # a stream ends with `reconnect` after this long



@dataclass(eq=False)
class Batch:
    """Consecutive `log` events as sent: one bytes object shared by every follower."""
    data: bytes
    cursors: list[str]   # each event's cursor
    ends: list[int]      # where each event ends in `data`
    holders: int = 0     # readers and followers holding it (Hub.hold counts its bytes once)

    @property
    def lines(self) -> int:
        return len(self.cursors)

    def after(self, cursor: str) -> Batch | None:
        """The events after `cursor` (one of ours), sliced out."""
        i = self.cursors.index(cursor)
        if i + 1 == len(self.cursors):
            return None
        return Batch(self.data[self.ends[i]:], self.cursors[i + 1:], [e - self.ends[i] for e in self.ends[i + 1:]])


@dataclass(frozen=True)
class Read:
    batches: list[Batch]
    cursor: str | None
    more: bool


def read_batches(backend: Backend, view: JobView, replica: str | None, since: str | None, limit: int,
                 cfg: FanoutSettings, most: int = READ_BATCHES) -> Read:
    """A page read as batches of events (runs in a worker thread)."""
    return batches_of(read(backend, view.handle, replica, since, limit), since, limit, cfg, most)


def batches_of(page: LogPage, since: str | None, limit: int, cfg: FanoutSettings, most: int = READ_BATCHES) -> Read:
    """A page's events in at most `most` batches, bounded in bytes. A page whose events would
    not fit stops early: its cursor is the last line given, and `more` says to read again
    at once. (A follower catching up alone reads one batch at a time: its reads are its own,
    not shared, and a follower that stops reading holds no more than that.)"""
    batches: list[Batch] = []
    parts: list[bytes] = []
    cursors: list[str] = []
    ends: list[int] = []
    size = 0
    cursor = page.cursor
    more = page.more or len(page.lines) >= limit
    for i, line in enumerate(page.lines):
        event = log_event(line, cfg.line_max_bytes).encode()
        if size and size + len(event) > cfg.batch_bytes:
            batches.append(Batch(b"".join(parts), cursors, ends))
            parts, cursors, ends, size = [], [], [], 0
            if len(batches) >= most:
                cursor, more = page.lines[i - 1].cursor, True
                break
        parts.append(event)
        size += len(event)
        cursors.append(line.cursor)
        ends.append(size)
    if parts:
        batches.append(Batch(b"".join(parts), cursors, ends))
    return Read(batches, cursor or since, more)


def reconnect_event(cursor: str | None, reason: str) -> bytes:
    return _event("reconnect", {"cursor": cursor, "reason": f"{reason}; reconnect with Last-Event-ID to "
                                "resume after the last line"}, None).encode()
