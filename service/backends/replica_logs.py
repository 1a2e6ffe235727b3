"""Reading replica log files in the local wrapper's record format (service/backends/local/wrapper.py).

Shared by the local and slurm backends (Slurm tasks write the same format, docs/slurm.md),
so it lives beside them rather than in either: the backends stay independent of each other.

Cursor: the byte offset reached in each replica's file, so one `since` resumes
every replica at once: "0-0:1234,1-0:99" (workerpool0-0 at byte 1234, ...),
base64url-encoded to keep it opaque and short (it rides on every line and SSE
event). A replica missing from it starts at 0."""
from __future__ import annotations

import base64
import binascii
import heapq
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from service.core.errors import Invalid, Problem
from service.lifecycle.protocol import LogLine, LogPage

READ_CHUNK = 1 << 20          # bytes read from one file per call, at most
_EPOCH = datetime.fromtimestamp(0, UTC)
_POOL_TASK = re.compile(r"^workerpool(\d+-\d+)$")
_ENTRY = re.compile(r"^([A-Za-z0-9_.-]{1,64}):([0-9]{1,18})$")
_B64URL = re.compile(r"^[A-Za-z0-9_-]+$")
# Far beyond any replica log, far below what lseek() refuses (EINVAL past the file system's maximum).
MAX_OFFSET = 1 << 40


def _short(task: str) -> str:
    m = _POOL_TASK.match(task)
    return m.group(1) if m else task


def _long(key: str) -> str:
    return f"workerpool{key}" if re.match(r"^\d+-\d+$", key) else key


def encode_cursor(offsets: dict[str, int]) -> str:
    raw = ",".join(f"{_short(task)}:{offset}" for task, offset in sorted(offsets.items()))
    return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode()


def decode_cursor(cursor: str | None) -> dict[str, int]:
    """Strict: a cursor this service did not hand out is a 422, never a silent
    restart from the beginning, and no offset beyond MAX_OFFSET reaches seek()."""
    if not cursor:
        return {}
    try:
        if not _B64URL.match(cursor):
            raise ValueError("not base64url")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        entries = [_ENTRY.match(e) for e in raw.split(",")]
    except (binascii.Error, ValueError):
        entries = [None]
    matched = [m for m in entries if m is not None]
    if len(matched) != len(entries) or len({m.group(1) for m in matched}) != len(matched):
        raise Invalid.of([Problem("since", "not a log cursor this service handed out",
                                  "pass the `cursor` of a line or page (or the SSE event id) unchanged")])
    offsets = {_long(m.group(1)): int(m.group(2)) for m in matched}
    if any(offset > MAX_OFFSET for offset in offsets.values()):
        raise Invalid.of([Problem("since", f"log cursor points beyond {MAX_OFFSET} bytes, past any log",
                                  "pass the `cursor` of a line or page (or the SSE event id) unchanged")])
    return offsets


def parse_record(raw: bytes) -> tuple[str, str, str]:
    """(timestamp, stream, message) from one record without its newline."""
    text = raw.decode("utf-8", "replace")
    ts, _, rest = text.partition(" ")
    stream, _, message = rest.partition(" ")
    if len(ts) != 27 or not ts.endswith("Z") or stream not in ("stdout", "stderr"):
        return "", "stdout", text  # not written by the wrapper: keep it, undated
    return ts, stream, message


def _timestamp(ts: str) -> datetime:
    return datetime.fromisoformat(ts) if ts else _EPOCH


def read_records(path: Path, offset: int, max_bytes: int) -> list[tuple[str, str, str, int]]:
    """Whole records after `offset`: (timestamp, stream, message, offset after it)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max_bytes)
    except FileNotFoundError:
        return []
    out = []
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # a partial record (still being written, or cut by max_bytes): later
        ts, stream, message = parse_record(data[pos:nl])
        pos = nl + 1
        out.append((ts, stream, message, offset + pos))
    if not out and len(data) == max_bytes:
        # One record longer than a whole chunk (the wrapper caps lines at 64 KiB,
        # so only a foreign file gets here): hand it out cut rather than stall.
        ts, stream, message = parse_record(data)
        out.append((ts, stream, message, offset + len(data)))
    return out


def _tagged(task: str, records: list) -> Iterable:
    return ((ts, task, stream, message, end) for ts, stream, message, end in records)


def read_page(files: dict[str, Path], since: str | None, limit: int) -> LogPage:
    """Up to `limit` lines after `since` from the replicas in `files`, merged
    by timestamp (each replica's own lines stay in file order)."""
    offsets = decode_cursor(since)
    current = {task: offsets.get(task, 0) for task in files}
    per_file_bytes = max(64 * 1024, min(READ_CHUNK, limit * 512))
    streams: list[Iterable] = [_tagged(task, read_records(path, current[task], per_file_bytes))
                               for task, path in files.items()]
    lines: list[LogLine] = []
    for ts, task, stream, message, end in heapq.merge(*streams, key=lambda r: r[0]):
        if len(lines) >= limit:
            break
        current[task] = end
        lines.append(LogLine(cursor=encode_cursor(current), replica=task, stream=stream,
                             timestamp=_timestamp(ts), message=message))
    more = len(lines) >= limit or any(_size(path) > current[task] for task, path in files.items())
    return LogPage(lines=lines, cursor=encode_cursor(current), more=more)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def tail(path: Path, n: int = 20, max_bytes: int = 64 * 1024) -> list[str]:
    """The last `n` messages of one replica's log (both streams)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except FileNotFoundError:
        return []
    records = data.split(b"\n")
    if size > max_bytes:
        records = records[1:]  # the first one is probably cut
    return [parse_record(r)[2] for r in records if r][-n:]


def silence(files: dict[str, Path], since: float, now: float) -> dict | None:
    """Observation.silence for replicas whose logs are these files (task -> file; the chiefs and
    workers still running, the replicas a stall is judged by): the longest any has written
    nothing, counted from `since` (the job's start) at the earliest. Progress lines are output
    too. None: no replica to judge. The lifecycle judges it (lifecycle/stalls.py)."""
    longest: dict | None = None
    for task, path in files.items():
        try:
            last = os.stat(path).st_mtime
        except FileNotFoundError:
            last = 0.0
        seconds = max(0.0, now - max(last, since))
        if longest is None or seconds > longest["seconds"]:
            longest = {"replica": task, "seconds": seconds}
    return longest
