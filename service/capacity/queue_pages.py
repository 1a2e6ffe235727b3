"""One computed queue made ready for its reads (GET /v1/queue, a waiting job's view, /ui/queue):
plain bytes and numbers, made once per computation where the computation runs (the queue's
worker process, capacity/queue_worker.py, or the queue's thread in tests), so that the API
process only slices it: a page of 1,000 entries is one slice of ready JSON plus the caller's own
team's entries, a waiting job's place one search of 16-byte ids and one small unpickle.

The JSON is the one GET /v1/queue's models give (service/capacity/queue.py view(): the same
BackendQueue and QueueEntry, dumped by pydantic): another team's entry carries only its team,
position, priority, demand and public factors, built by queue.py's own functions. The caller's
own team's entries are built per read, as before: their name and class come from the database,
and an entry is shown as the caller's only where both the team name and the job's team row say so.

Everything here crosses a pipe (`wire()` / `from_wire()`): bytes, str, int, dicts of them, arrays
and datetimes only, read back by an unpickler that builds nothing else."""
from __future__ import annotations

import bisect
import io
import pickle
import uuid
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_core import to_json
from sqlalchemy.orm import Session

from service.capacity import queue
from service.capacity.queue import Computed
from service.capacity.queue_schemas import BackendQueue, QueueEntry, QueueFactors, QueuePlace
from service.scheduling.model import Queued, quota_part

_ID = 16    # bytes of a job's id in `ids`


@dataclass(frozen=True)
class Prepared:
    backend: str
    computed_at: datetime
    capacity: dict[str, int]
    head: bytes             # the BackendQueue's fields before `waiting`, as JSON, without its closing brace
    body: bytes             # each entry of the order as another team sees it, as JSON, joined by commas
    ends: array             # ends[i]: where entry i ends in `body` (the comma after it, if any, is at ends[i])
    ids: bytes              # the order's job ids, 16 bytes each
    teams: dict[str, array]  # per team: the indexes in the order of its waiting jobs, ascending
    own: bytes              # per entry: what its own team reads of it (pickled plain values), concatenated
    own_ends: array         # own_ends[i]: where entry i's part of `own` ends

    @classmethod
    def of(cls, computed: Computed, *, max_waiting: int | None) -> Prepared:
        """Made where the computation runs: every entry serialized once, for every reader."""
        # `waiting` and `next_offset` close a BackendQueue (tests/capacity/test_queue_pages.py checks it).
        head = queue.head(computed, max_waiting).model_dump_json(exclude={"waiting", "next_offset"}).encode()
        teams: dict[str, array] = {}
        public, own, ids = [], [], bytearray()
        for i, (job_id, note) in enumerate(computed.order):
            public.append(_public_json(computed, job_id, note))
            own.append(pickle.dumps(_own_fields(computed, job_id, note), protocol=5))
            teams.setdefault(computed.waiting[job_id].team, array("q")).append(i)
            ids += job_id.bytes
        return cls(computed.backend, computed.at, dict(computed.snapshot.capacity), head[:-1], b",".join(public),
                   _ends(public, 1), bytes(ids), teams, b"".join(own), _ends(own, 0))

    def __len__(self) -> int:
        return len(self.ends)

    def _start(self, i: int) -> int:
        return 0 if i == 0 else self.ends[i - 1] + 1

    def job_id(self, i: int) -> uuid.UUID:
        return uuid.UUID(bytes=self.ids[i * _ID:(i + 1) * _ID])

    def index(self, job_id: uuid.UUID) -> int | None:
        """Where the job stands in the order (None: not in this computation)."""
        key, at = job_id.bytes, 0
        while (at := self.ids.find(key, at)) >= 0:
            if at % _ID == 0:
                return at // _ID
            at += 1
        return None

    def _own(self, i: int) -> dict[str, Any]:
        start = 0 if i == 0 else self.own_ends[i - 1]
        return loads(self.own[start:self.own_ends[i]])

    def entry(self, i: int, name: str, priority_class: str | None) -> QueueEntry:
        """Entry i as its own team reads it (the caller checked the job is the team's)."""
        fields = self._own(i)
        factors = fields.pop("factors")
        return QueueEntry(**fields, id=self.job_id(i), display_name=name,
                          factors=None if factors is None else QueueFactors(**factors, priority_class=priority_class))

    def place(self, job_id: uuid.UUID, priority_class: str | None) -> QueuePlace | None:
        """A waiting job's own place, for its view (the job's reader may see it: the caller checked)."""
        i = self.index(job_id)
        if i is None:
            return None
        fields = self._own(i)
        factors = fields["factors"]
        return QueuePlace(position=fields["position"], why=fields["why"], ahead=fields["ahead"],
                          likely_start=fields["likely_start"], estimated_start=fields["estimated_start"],
                          factors=None if factors is None else QueueFactors(**factors, priority_class=priority_class),
                          computed_at=self.computed_at)

    def page_json(self, session: Session, team: str, team_id: uuid.UUID, *, limit: int, offset: int) -> bytes:
        """The same JSON as queue.view(...) dumped: the shared entries sliced, the caller's own
        team's entries in that slice built afresh."""
        n = len(self)
        end = min(offset + limit, n)
        parts: list[bytes] = []
        if offset < end:
            cur = self._start(offset)
            for i, own in self._mine(session, team, team_id, offset, end):
                parts += (self.body[cur:self._start(i)], own.model_dump_json().encode())
                cur = self.ends[i]
            parts.append(self.body[cur:self.ends[end - 1]])
        next_offset = offset + limit if offset + limit < n else None
        return b"".join((self.head, b',"waiting":[', *parts, b'],"next_offset":', to_json(next_offset), b"}"))

    def _mine(self, session: Session, team: str, team_id: uuid.UUID, start: int, end: int,
              first: int | None = None) -> Iterator[tuple[int, QueueEntry]]:
        """The caller's team's entries among indexes [start, end) (the `first` of them), in order."""
        ours = self.teams.get(team, array("q"))
        mine = ours[bisect.bisect_left(ours, start):bisect.bisect_left(ours, end)][:first]
        if not mine:
            return
        rows = queue.own_rows(session, [self.job_id(i) for i in mine], team_id)
        for i in mine:
            found = rows.get(self.job_id(i))
            if found is not None:
                yield i, self.entry(i, *found)

    def view(self, session: Session, team: str, team_id: uuid.UUID, *, limit: int, offset: int) -> BackendQueue:
        """The page as its model (the UI reads it)."""
        return BackendQueue.model_validate_json(self.page_json(session, team, team_id, limit=limit, offset=offset))

    def own_places(self, session: Session, team: str, team_id: uuid.UUID, *, limit: int) -> list[QueueEntry]:
        """The caller's team's waiting jobs wherever they stand in the order (the first `limit`)."""
        return [e for _, e in self._mine(session, team, team_id, 0, len(self), first=limit)]

    def wire(self) -> bytes:
        """What crosses the pipe from the worker (plain values only)."""
        return pickle.dumps((self.backend, self.computed_at, self.capacity, self.head, self.body, self.ends, self.ids,
                             self.teams, self.own, self.own_ends), protocol=5)

    @classmethod
    def from_wire(cls, data: bytes) -> Prepared:
        fields = loads(data)
        if not isinstance(fields, tuple) or len(fields) != 10:
            raise pickle.UnpicklingError("not a prepared queue")
        return cls(*fields)


# What a prepared queue may hold besides plain builtins: the datetimes and arrays it is made of.
_ALLOWED = {("datetime", "datetime"), ("datetime", "timezone"), ("datetime", "timedelta"),
            ("array", "array"), ("array", "_array_reconstructor")}


class _Plain(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a prepared queue")
        return super().find_class(module, name)


def loads(data: bytes) -> Any:
    """pickle.loads that builds plain values only (what the queue's worker sends)."""
    return _Plain(io.BytesIO(data)).load()


def _ends(parts: list[bytes], gap: int) -> array:
    out, at = array("q"), 0
    for i, part in enumerate(parts):
        at += part.__len__() + (gap if i else 0)
        out.append(at)
    return out


def _own_fields(computed: Computed, job_id: uuid.UUID, note: Queued[uuid.UUID]) -> dict[str, Any]:
    """queue.entry(computed, job_id, note, own) but for the name and the class: plain values."""
    job = computed.waiting[job_id]
    place = queue.own_place(computed, job_id, note)
    factors = place.pop("factors")
    return {"position": note.position, "team": job.team, "priority": job.priority, "demand": quota_part(job.demand),
            **place, "factors": None if factors is None else factors.model_dump(exclude={"priority_class"})}


# Every field of an entry and of its factors, in the models' order, null unless set: another team's
# entry serialized from plain values (12,000 models built and dumped took ~0.5 s of a computation;
# tests/capacity/test_queue_api.py checks the JSON is the models').
_ENTRY = dict.fromkeys(QueueEntry.model_fields)
_FACTORS = dict.fromkeys(QueueFactors.model_fields)


def _public_json(computed: Computed, job_id: uuid.UUID, note: Queued[uuid.UUID]) -> bytes:
    """queue.entry(computed, job_id, note, None), as JSON: what another team sees of the job."""
    job, parts = computed.waiting[job_id], computed.factors.get(job_id)
    return to_json({**_ENTRY, "position": note.position, "team": job.team, "priority": job.priority,
                    "demand": quota_part(job.demand),
                    "factors": None if parts is None else {**_FACTORS, **queue.public_fields(parts)}})


def list_json(pages: list[bytes]) -> bytes:
    """QueueList's JSON from its items' (one per backend)."""
    return b'{"items":[' + b",".join(pages) + b"]}"
