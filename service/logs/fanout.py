"""One reader per log stream, shared by every follower of it.

Followers of the same job (and replica filter) share one Reader: an asyncio task
that reads the backend (in a worker thread, one read at a time), checks the job's
state now and then, and fans each batch of lines out to every follower as ready
SSE text. N followers cost one read per interval, not N; no thread waits per
follower. The interval adapts: at once again while there is more, then doubling
up to the backend's ceiling while nothing is new; and with many followers, long enough
that fanning out takes at most TRAINJOBS_LOGS_FANOUT_LOOP_SHARE of the event loop.

A follower joins from its own cursor: if the reader's recent lines hold it (or it
is the reader's position), it is served from there; otherwise it catches up with
reads of its own until it meets the reader. A follower that falls behind (its
unsent lines exceed TRAINJOBS_LOGS_FOLLOWER_BUFFER_LINES) is cut with a `resync`
event carrying the cursor of the last line it was given, and the stream ends: it
reconnects with Last-Event-ID (browsers' EventSource do it themselves) and
nobody else is slowed."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

import anyio

from service.lifecycle.protocol import Backend, LogPage
from service.logs.service import JobView, _event, end_event, load_job, log_event, read

log = logging.getLogger("trainjobs.logs.fanout")


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
    loop_share: float = 0.25        # the most of the loop's time a reader spends fanning out (next_read_after)


@dataclass(eq=False)  # followers are told apart by identity (they live in sets)
class Follower:
    cursor: str | None                       # after the last line handed to it
    chunks: deque = field(default_factory=deque)
    pending: int = 0                         # lines in `chunks`
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False
    given_at: float = field(default_factory=time.monotonic)   # when it was last given anything

    def beat(self, now: float) -> None:
        """A heartbeat (an SSE comment) for a follower given nothing for a while (Hub._heartbeats)."""
        if not self.done:
            self.chunks.append(": keep-alive\n\n")
            self.given_at = now
            self.ready.set()

    def give(self, text: str, lines: int, cursor: str | None, limit: int) -> bool:
        """Queue a chunk; False (and a resync event queued) when the follower lags too far."""
        if self.done:
            return True
        # Lagging: what it was given before is still unsent, `limit` lines of it or more. (Not
        # "pending + this batch": a page may hold more lines than the limit, and a follower that
        # has a few lines in flight when a full page comes is keeping up.) At most `limit` lines
        # plus one page are ever held for a follower.
        if self.pending >= limit:
            self.chunks.append(_event("resync", {"cursor": self.cursor, "reason": "this follower fell too far "
                                                 "behind; reconnect with Last-Event-ID to resume"}, None))
            self.done = True
            self.ready.set()
            return False
        self.chunks.append(text)
        self.pending += lines
        self.cursor = cursor
        self.given_at = time.monotonic()
        self.ready.set()
        return True

    def finish(self, text: str) -> None:
        if not self.done:
            self.chunks.append(text)
            self.done = True
            self.ready.set()


def next_read_after(floor: float, fan_out_seconds: float, share: float) -> float:
    """Seconds from a fan-out to the next read while lines keep coming: `floor`, or longer when
    handing a batch to every follower took the loop long enough that reading at the floor
    would give fan-outs more than `share` of it. A thousand followers take the loop ~50 ms a
    batch: reading every 0.1 s left requests waiting behind half of the loop's time; with
    this, followers get bigger batches a little later and requests are answered meanwhile."""
    return max(floor, fan_out_seconds * (1 / share - 1))


class Reader:
    def __init__(self, hub: "Hub", key: tuple, backend: Backend, view: JobView, team_id: uuid.UUID,
                 replica: str | None, cursor: str | None, limit: int) -> None:
        self.hub, self.key, self.backend, self.view = hub, key, backend, view
        self.team_id, self.replica, self.limit = team_id, replica, limit
        self.head = cursor                        # after the last line read
        self.recent: deque[tuple[str, str]] = deque(maxlen=hub.cfg.buffer_lines)  # (cursor, event text)
        self.followers: set[Follower] = set()
        self.changed = asyncio.Event()            # set after every read (catching-up followers wait on it)
        self.ended: str | None = None             # the end event, once the job is final and read out
        self.reads = 0
        self.task = asyncio.get_running_loop().create_task(self.run(), name=f"logs-reader-{key}")

    def _after(self, cursor: str | None) -> list[str] | None:
        """Recent events after `cursor`, or None if the reader cannot tell."""
        if cursor == self.head:
            return []
        for i, (c, _) in enumerate(self.recent):
            if c == cursor:
                return [text for _, text in list(self.recent)[i + 1:]]
        return None

    async def run(self) -> None:
        cfg = self.hub.cfg
        floor = max(cfg.min_interval, self.backend.capabilities.log_poll_seconds)
        interval = floor
        last_state = time.monotonic()
        idle_since: float | None = None
        final = self.view.final
        try:
            while True:
                page = await self._read()
                self.reads += 1
                if page.lines:
                    started = time.monotonic()
                    await self._fan_out(page)
                    interval = next_read_after(floor, time.monotonic() - started, cfg.loop_share)
                else:
                    interval = min(interval * 2, max(cfg.max_interval, 4 * floor))
                self.changed.set()
                self.changed = asyncio.Event()
                if page.more or len(page.lines) >= self.limit:
                    continue  # more is waiting: read on at once (and read everything before an end)
                if final:
                    self.ended = end_event(self.view, self.head)
                    for i, f in enumerate(list(self.followers)):
                        if i and i % cfg.wake_chunk == 0:
                            await asyncio.sleep(0)  # as in _fan_out: the loop serves others between
                        f.finish(self.ended)
                    return
                now = time.monotonic()
                if now - last_state >= cfg.state_every:
                    last_state = now
                    try:
                        self.view = await anyio.to_thread.run_sync(load_job, self.hub.session_factory,
                                                                   self.team_id, self.view.handle.id)
                    except Exception:  # the database may be down for a moment: keep streaming
                        log.warning("job %s: could not refresh its state", self.view.handle.id, exc_info=True)
                    if self.view.final:
                        final = True  # one more read: the lines written before the end
                        continue
                if not self.followers:
                    idle_since = idle_since or now
                    if now - idle_since >= cfg.idle_seconds:
                        return
                else:
                    idle_since = None
                await asyncio.sleep(interval)
        finally:
            self.hub._gone(self)
            self.changed.set()

    async def _read(self) -> LogPage:
        try:
            return await anyio.to_thread.run_sync(read, self.backend, self.view.handle, self.replica, self.head,
                                                  self.limit)
        except Exception:
            log.warning("job %s: reading logs failed; retrying", self.view.handle.id, exc_info=True)
            return LogPage(lines=[], cursor=self.head)

    async def _fan_out(self, page: LogPage) -> None:
        texts = [log_event(line) for line in page.lines]
        for line, text in zip(page.lines, texts):
            self.recent.append((line.cursor, text))
        self.head = page.cursor or self.head
        chunk = "".join(texts)
        cfg = self.hub.cfg
        # Followers are woken `wake_chunk` at a time, with a turn of the event loop between:
        # writing a batch to a thousand sockets takes the loop about 50 ms, and a request
        # arriving meanwhile would otherwise wait behind all of it. (A follower that joins
        # meanwhile is not in this list: it takes the batch from `recent`.)
        for i, f in enumerate(list(self.followers)):
            if i and i % cfg.wake_chunk == 0:
                await asyncio.sleep(0)
            if not f.give(chunk, len(texts), self.head, cfg.follower_lines):
                self.followers.discard(f)
                self.hub.cut += 1


class Hub:
    """The readers of one process (app.state.log_hub)."""

    def __init__(self, session_factory, cfg: FanoutSettings) -> None:
        self.session_factory = session_factory
        self.cfg = cfg
        self.readers: dict[tuple, Reader] = {}
        self.cut = 0  # followers cut for lagging (metrics, tests)
        self._heart: asyncio.Task | None = None

    def _ensure_heartbeats(self) -> None:
        if self._heart is None or self._heart.done():
            self._heart = asyncio.get_running_loop().create_task(self._heartbeats(), name="logs-heartbeats")

    async def _heartbeats(self) -> None:
        """One task for every follower of this process: a follower given nothing for
        `heartbeat` seconds gets an SSE comment (proxies and browsers keep the stream open).
        Ends when no reader is left; the next follower starts it again."""
        tick = self.cfg.heartbeat / 4
        while self.readers:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for reader in list(self.readers.values()):
                for f in list(reader.followers):
                    if now - f.given_at >= self.cfg.heartbeat:
                        f.beat(now)

    def _gone(self, reader: Reader) -> None:
        if self.readers.get(reader.key) is reader:
            del self.readers[reader.key]

    async def follow(self, backend: Backend, view: JobView, team_id: uuid.UUID, replica: str | None,
                     first: LogPage, since: str | None, limit: int):
        """The SSE text of one follower: `log` events, then `end` (or `resync` if it lagged)."""
        yield f": following job {view.handle.id}\n\n"  # a comment: headers go out at once
        retry = "retry: 1000\n"  # sent with the first event: a block of its own would be an empty event
        cursor = first.cursor or since
        if first.lines:
            yield retry + "".join(log_event(line) for line in first.lines)
            retry = ""
        # Catch up alone while more is waiting, then join the shared reader.
        while first.more or len(first.lines) >= limit:
            first = await anyio.to_thread.run_sync(read, backend, view.handle, replica, cursor, limit)
            cursor = first.cursor or cursor
            if first.lines:
                yield "".join(log_event(line) for line in first.lines)
        follower = Follower(cursor)
        reader = await self._join(backend, view, team_id, replica, follower, limit)
        self._ensure_heartbeats()
        try:
            while True:
                if not follower.chunks:
                    if follower.done:
                        return  # everything given, the last `end` or `resync` included
                    follower.ready.clear()
                    # No timer of its own: the hub's one heartbeat task wakes a quiet follower
                    # (a timer per wait cost a tenth of a fan-out's CPU with 1,000 followers).
                    await follower.ready.wait()
                    continue
                text = "".join(follower.chunks)
                follower.chunks.clear()
                follower.pending = 0
                yield retry + text
                retry = ""
        finally:
            reader.followers.discard(follower)

    async def _join(self, backend: Backend, view: JobView, team_id: uuid.UUID, replica: str | None,
                    follower: Follower, limit: int) -> Reader:
        key = (view.handle.id, replica)
        while True:
            reader = self.readers.get(key)
            if reader is None or reader.task.done():
                reader = Reader(self, key, backend, view, team_id, replica, follower.cursor, limit)
                self.readers[key] = reader
            if reader.ended is not None:
                follower.finish(reader.ended)
                return reader
            backlog = reader._after(follower.cursor)
            if backlog is not None:
                for text in backlog:
                    follower.give(text, 1, None, self.cfg.follower_lines)
                follower.cursor = reader.head
                reader.followers.add(follower)
                return reader
            # Not where the reader is: read alone up to where it is (it may be behind us,
            # then its next read reaches our cursor).
            page = await anyio.to_thread.run_sync(read, backend, view.handle, replica, follower.cursor, limit)
            if page.lines:
                text = "".join(log_event(line) for line in page.lines)
                follower.give(text, len(page.lines), page.cursor, self.cfg.follower_lines)
                if follower.done:
                    return reader
            else:
                changed = reader.changed
                try:
                    await asyncio.wait_for(changed.wait(), 5.0)
                except (asyncio.TimeoutError, TimeoutError):
                    pass
