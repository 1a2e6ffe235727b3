"""One reader per log stream, shared by every follower of it.

Followers of the same job (and replica filter) share one Reader: an asyncio task
that reads the backend (in a worker thread, one read at a time), checks the job's
state now and then, and fans each batch of lines out to every follower as ready
SSE bytes (one bytes object, shared by all). N followers cost one read per interval,
not N; no thread waits per follower. The interval adapts: at once again while there is
more, then doubling up to the backend's ceiling while nothing is new; and with many
followers, long enough that fanning out takes at most TRAINJOBS_LOGS_FANOUT_LOOP_SHARE
of the event loop.

Memory is bounded in bytes, whatever a replica prints (a line of control characters
is six times its size once JSON-escaped): a streamed line is cut at
TRAINJOBS_LOGS_STREAM_LINE_MAX_BYTES with a visible marker; one read hands out at most
four batches of TRAINJOBS_LOGS_STREAM_BATCH_BYTES; a reader keeps
TRAINJOBS_LOGS_READER_BUFFER_BYTES (and _LINES) of recent events; a follower may lag by
TRAINJOBS_LOGS_FOLLOWER_BUFFER_BYTES (and _LINES); all of them together by
TRAINJOBS_LOGS_BUFFER_BYTES per process, where a batch counts once however many followers
and readers hold it (Hub.hold: it is one bytes object, shared).

A follower joins from its own cursor: if the reader's recent lines hold it (or it
is the reader's position), it is served from there; otherwise it catches up with
reads of its own until it meets the reader. A follower that falls behind is cut with
a `resync` event carrying the cursor of the last line it was given, and the stream
ends: it reconnects with Last-Event-ID (browsers' EventSource do it themselves) and
nobody else is slowed. A stream also ends with a `reconnect` event after
TRAINJOBS_LOGS_STREAM_MAX_SECONDS and when the service stops (Hub.stop)."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

import anyio

from service.lifecycle.protocol import Backend, LogPage
from service.logs.batches import Batch, FanoutSettings, Read, batches_of, read_batches, reconnect_event
from service.logs.service import JobView, _event, end_event, load_job

log = logging.getLogger("trainjobs.logs.fanout")


@dataclass(eq=False)  # followers are told apart by identity (they live in sets)
class Follower:
    hub: Hub
    cursor: str | None                       # after the last line handed to it
    deadline: float = float("inf")           # it ends with `reconnect` then (max_seconds)
    chunks: deque = field(default_factory=deque)
    pending: int = 0                         # lines in `chunks`
    pending_bytes: int = 0                   # bytes in `chunks` (its own lag limit)
    holding: list = field(default_factory=list)  # the batches in `chunks` (Hub.hold: counted once in hub.held)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False
    given_at: float = field(default_factory=time.monotonic)   # when it was last given anything

    def beat(self, now: float) -> None:
        """A heartbeat (an SSE comment) for a follower given nothing for a while (Hub._heartbeats)."""
        if not self.done:
            self.chunks.append(b": keep-alive\n\n")
            self.given_at = now
            self.ready.set()

    def give(self, batch: Batch, cursor: str | None) -> bool:
        """Queue a batch; False (and a resync event queued) when the follower lags too far."""
        if self.done:
            return True
        cfg, hub = self.hub.cfg, self.hub
        n = len(batch.data)
        # Lagging: what it was given before is still unsent, past its limits or past what the
        # process may hold. (Not "pending + this batch": a follower with nothing pending takes
        # any batch, so one that keeps up is never cut.) At most a limit plus one read is held.
        new = 0 if batch.holders else n  # a batch already held costs the process nothing more
        if self.pending and (self.pending >= cfg.follower_lines or self.pending_bytes >= cfg.follower_bytes
                             or hub.held + new > cfg.process_bytes):
            self.finish(_event("resync", {"cursor": self.cursor, "reason": "this follower fell too far "
                                          "behind; reconnect with Last-Event-ID to resume"}, None).encode())
            return False
        self.chunks.append(batch.data)
        self.pending += batch.lines
        self.pending_bytes += n
        self.holding.append(batch)
        hub.hold(batch)
        self.cursor = cursor
        self.given_at = time.monotonic()
        self.ready.set()
        return True

    def take(self) -> list[bytes]:
        out = list(self.chunks)
        self.chunks.clear()
        self.release()
        return out

    def release(self) -> None:
        for batch in self.holding:
            self.hub.unhold(batch)
        self.holding.clear()
        self.pending = self.pending_bytes = 0

    def finish(self, text: bytes) -> None:
        if not self.done:
            self.chunks.append(text)
            self.done = True
            self.ready.set()


def with_retry(chunks: list[bytes], retry: bytes) -> bytes:
    """Put the `retry:` field in front of the first event among `chunks` (in place); what is
    left to send (b"" once placed). Never in front of a heartbeat: "retry: 1000\\n: keep-alive"
    is a block without data, which httpx-sse and others hand out as an empty `message` event
    (a follower quiet for `heartbeat` seconds before its first line saw one and choked)."""
    for i, chunk in enumerate(chunks):
        if not chunk.startswith(b":"):
            chunks[i] = retry + chunk
            return b""
    return retry


def next_read_after(floor: float, fan_out_seconds: float, share: float) -> float:
    """Seconds from a fan-out to the next read while lines keep coming: `floor`, or longer when
    handing a batch to every follower took the loop long enough that reading at the floor
    would give fan-outs more than `share` of it. A thousand followers take the loop ~50 ms a
    batch: reading every 0.1 s left requests waiting behind half of the loop's time; with
    this, followers get bigger batches a little later and requests are answered meanwhile."""
    return max(floor, fan_out_seconds * (1 / share - 1))


class Reader:
    def __init__(self, hub: Hub, key: tuple, backend: Backend, view: JobView, team_id: uuid.UUID,
                 replica: str | None, cursor: str | None, limit: int) -> None:
        self.hub, self.key, self.backend, self.view = hub, key, backend, view
        self.team_id, self.replica, self.limit = team_id, replica, limit
        self.head = cursor                        # after the last line read
        self.recent: deque[Batch] = deque()       # the latest batches (buffer_bytes, buffer_lines)
        self.recent_bytes = self.recent_lines = 0
        self.followers: set[Follower] = set()
        self.changed = asyncio.Event()            # set after every read (catching-up followers wait on it)
        self.ended: bytes | None = None           # the end event, once the job is final and read out
        self.reads = 0
        self.task = asyncio.get_running_loop().create_task(self.run(), name=f"logs-reader-{key}")

    def _after(self, cursor: str | None) -> list[Batch] | None:
        """Recent batches after `cursor`, or None if the reader cannot tell."""
        if cursor == self.head:
            return []
        if cursor is None:
            return None
        for i, batch in enumerate(self.recent):
            if cursor in batch.cursors:
                rest = batch.after(cursor)
                return ([rest] if rest else []) + list(self.recent)[i + 1:]
        return None

    def _keep(self, batch: Batch) -> None:
        cfg, hub = self.hub.cfg, self.hub
        self.recent.append(batch)
        self.recent_bytes += len(batch.data)
        self.recent_lines += batch.lines
        hub.hold(batch)
        while self.recent and (self.recent_bytes > cfg.buffer_bytes or self.recent_lines > cfg.buffer_lines
                               or hub.held > cfg.process_bytes):
            self._drop()

    def _drop(self) -> None:
        old = self.recent.popleft()
        self.recent_bytes -= len(old.data)
        self.recent_lines -= old.lines
        self.hub.unhold(old)

    async def run(self) -> None:
        cfg = self.hub.cfg
        floor = max(cfg.min_interval, self.backend.capabilities.log_poll_seconds)
        interval = floor
        last_state = time.monotonic()
        idle_since: float | None = None
        final = self.view.final
        try:
            while True:
                got = await self._read()
                self.reads += 1
                if got.batches:
                    started = time.monotonic()
                    await self._fan_out(got)
                    interval = next_read_after(floor, time.monotonic() - started, cfg.loop_share)
                else:
                    self.head = got.cursor or self.head
                    interval = min(interval * 2, max(cfg.max_interval, 4 * floor))
                self.changed.set()
                self.changed = asyncio.Event()
                if got.more:
                    continue  # more is waiting: read on at once (and read everything before an end)
                if final:
                    self.ended = end_event(self.view, self.head).encode()
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
            while self.recent:
                self._drop()
            self.hub._gone(self)
            self.changed.set()

    async def _read(self) -> Read:
        try:
            return await anyio.to_thread.run_sync(read_batches, self.backend, self.view, self.replica, self.head,
                                                  self.limit, self.hub.cfg)
        except Exception:
            log.warning("job %s: reading logs failed; retrying", self.view.handle.id, exc_info=True)
            return Read([], self.head, False)

    async def _fan_out(self, got: Read) -> None:
        cfg = self.hub.cfg
        for batch in got.batches:
            self._keep(batch)
            self.head = batch.cursors[-1]
            # Followers are woken `wake_chunk` at a time, with a turn of the event loop between:
            # writing a batch to a thousand sockets takes the loop about 50 ms, and a request
            # arriving meanwhile would otherwise wait behind all of it. (A follower that joins
            # meanwhile is not in this list: it takes the batch from `recent`.)
            for i, f in enumerate(list(self.followers)):
                if i and i % cfg.wake_chunk == 0:
                    await asyncio.sleep(0)
                if not f.give(batch, self.head):
                    self.followers.discard(f)
                    self.hub.cut += 1
            await asyncio.sleep(0)  # followers take this batch before the next comes: none lags by a read
        self.head = got.cursor or self.head


class Hub:
    """The readers of one process (Services.log_hub, service/web/container.py)."""

    def __init__(self, session_factory, cfg: FanoutSettings) -> None:
        self.session_factory = session_factory
        self.cfg = cfg
        self.readers: dict[tuple, Reader] = {}
        self.cut = 0    # followers cut for lagging (metrics, tests)
        self.held = 0   # bytes held by readers' recent events and followers' unsent ones, each batch once
        self.stopped = False
        self.followers: set[Follower] = set()  # every follower of this process, joined or catching up
        self._heart: asyncio.Task | None = None

    def hold(self, batch: Batch) -> None:
        """One more holder of `batch` (a reader's recent events, a follower's unsent ones): its
        bytes count in `held` once, while anyone holds it. 5,000 followers of one batch of
        128 KiB hold 128 KiB, not 640 MB: counting it per follower cut followers with `resync`
        for memory the process did not use."""
        if not batch.holders:
            self.held += len(batch.data)
        batch.holders += 1

    def unhold(self, batch: Batch) -> None:
        batch.holders -= 1
        if not batch.holders:
            self.held -= len(batch.data)

    def stop(self) -> None:
        """The service is stopping: every stream ends now with a `reconnect` event."""
        self.stopped = True
        for f in list(self.followers):
            f.finish(reconnect_event(f.cursor, "the service is stopping"))
        for reader in list(self.readers.values()):
            reader.task.cancel()

    def _ensure_heartbeats(self) -> None:
        if self._heart is None or self._heart.done():
            self._heart = asyncio.get_running_loop().create_task(self._heartbeats(), name="logs-heartbeats")

    async def _heartbeats(self) -> None:
        """One task for every follower of this process: a follower given nothing for
        `heartbeat` seconds gets an SSE comment (proxies and browsers keep the stream open),
        and one past its deadline is ended with `reconnect`. Ends when no follower is left;
        the next follower starts it again."""
        tick = min(self.cfg.heartbeat, self.cfg.max_seconds) / 4
        while self.followers:
            await asyncio.sleep(tick)
            now = time.monotonic()
            for f in list(self.followers):
                if now >= f.deadline:
                    f.finish(reconnect_event(f.cursor, f"this stream reached its longest duration "
                                             f"({self.cfg.max_seconds:g} s)"))
                elif now - f.given_at >= self.cfg.heartbeat:
                    f.beat(now)

    def _gone(self, reader: Reader) -> None:
        if self.readers.get(reader.key) is reader:
            del self.readers[reader.key]

    async def follow(self, backend: Backend, view: JobView, team_id: uuid.UUID, replica: str | None,
                     first: LogPage, since: str | None, limit: int, max_seconds: float | None = None):
        """The SSE bytes of one follower: `log` events, then `end` (or `resync` if it lagged,
        `reconnect` past `max_seconds` or when the service stops). One generator on purpose
        (over 60 lines): its state is the follower's, kept across yields."""
        cfg = self.cfg
        longest = max_seconds if max_seconds is not None else cfg.max_seconds
        follower = Follower(self, since, deadline=time.monotonic() + longest)
        self.followers.add(follower)
        self._ensure_heartbeats()
        key = (view.handle.id, replica)
        reader = None
        try:
            yield f": following job {view.handle.id}\n\n".encode()  # a comment: headers go out at once
            retry = b"retry: 1000\n"  # sent with the first event: a block of its own would be an empty event
            if self.stopped:
                follower.finish(reconnect_event(since, "the service is stopping"))
            got = await anyio.to_thread.run_sync(batches_of, first, since, limit, cfg, 1)
            del first  # not kept for the stream's life (it may be a megabyte of raw lines)
            # Catch up alone while more is waiting (or while ahead of the reader), then join it.
            while not follower.done:
                while got.batches:
                    yield retry + got.batches.pop(0).data  # popped: not held while the socket is full
                    retry = b""
                follower.cursor = got.cursor or follower.cursor
                # Join as soon as the shared reader's recent lines hold our cursor (a follower
                # reading alone pays for its own reads and escaping), or once caught up.
                current = self.readers.get(key)
                if not got.more or (current is not None and not current.task.done()
                                    and current._after(follower.cursor) is not None):
                    reader = self._join(backend, view, team_id, replica, follower, limit)
                    if reader is not None:
                        break
                    if not got.batches and (waiting := self.readers.get(key)) is not None:
                        try:  # ahead of the reader: its next read reaches our cursor
                            await asyncio.wait_for(waiting.changed.wait(), 5.0)
                        except TimeoutError:
                            pass
                        got = Read([], follower.cursor, False)
                        continue
                got = await anyio.to_thread.run_sync(read_batches, backend, view, replica, follower.cursor,
                                                     limit, cfg, 1)
            while True:
                if not follower.chunks:
                    if follower.done:
                        return  # everything given, the last `end`, `resync` or `reconnect` included
                    follower.ready.clear()
                    # No timer of its own: the hub's one heartbeat task wakes a quiet follower
                    # (a timer per wait cost a tenth of a fan-out's CPU with 1,000 followers).
                    await follower.ready.wait()
                    continue
                chunks = follower.take()
                if retry:
                    retry = with_retry(chunks, retry)
                # Small chunks go out together; big ones one by one, never copied per follower.
                if len(chunks) > 1 and sum(map(len, chunks)) <= 65536:
                    chunks = [b"".join(chunks)]
                for chunk in chunks:
                    yield chunk
        finally:
            follower.done = True
            follower.release()
            self.followers.discard(follower)
            if reader is not None:
                reader.followers.discard(follower)

    def _join(self, backend: Backend, view: JobView, team_id: uuid.UUID, replica: str | None,
              follower: Follower, limit: int) -> Reader | None:
        """The shared reader, joined where the follower is; None if it is elsewhere (the follower
        then reads alone up to it). Its recent batches after the follower's cursor are queued
        as they are (shared with the reader's buffer: not counted against the follower's lag,
        held while queued so the process's count stays true when the reader drops them)."""
        if self.stopped:
            follower.finish(reconnect_event(follower.cursor, "the service is stopping"))
            return None
        key = (view.handle.id, replica)
        reader = self.readers.get(key)
        if reader is None or reader.task.done():
            reader = Reader(self, key, backend, view, team_id, replica, follower.cursor, limit)
            self.readers[key] = reader
        if reader.ended is not None:
            follower.finish(reader.ended)
            return reader
        backlog = reader._after(follower.cursor)
        if backlog is None:
            return None
        for batch in backlog:
            follower.chunks.append(batch.data)
            follower.holding.append(batch)
            self.hold(batch)
        follower.cursor = reader.head
        reader.followers.add(follower)
        follower.ready.set()
        return reader
