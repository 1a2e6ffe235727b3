"""One computed queue made ready for its pages (GET /v1/queue): what every caller sees alike is
serialized once per computation, off the request path (capacity/queue_cache.py's thread), so a
page of 1,000 entries is a slice of ready JSON plus the caller's own team's entries.

The JSON is the one GET /v1/queue's models give (service/capacity/queue.py view(): the same
BackendQueue and QueueEntry, dumped by pydantic): another team's entry carries only its team,
position, priority, demand and public factors, built by queue.py's own _entry. The caller's own
team's entries are built per read, as before: their name and class come from the database, and
an entry is shown as the caller's only where both the team name and the job's team row say so."""
from __future__ import annotations

import bisect
import uuid
from dataclasses import dataclass

from pydantic_core import to_json
from sqlalchemy.orm import Session

from service.capacity import queue
from service.capacity.queue import Computed
from service.capacity.queue_schemas import QueueEntry, QueueFactors
from service.scheduling.model import Queued, quota_part


@dataclass(frozen=True)
class Prepared:
    computed: Computed
    head: bytes                     # the BackendQueue's fields before `waiting`, as JSON, without its closing brace
    public: list[bytes]             # each entry of the order as another team sees it, as JSON
    positions: dict[str, list[int]]  # per team: the indexes in the order of its waiting jobs, ascending

    @classmethod
    def of(cls, computed: Computed, *, max_waiting: int | None) -> Prepared:
        # `waiting` and `next_offset` close a BackendQueue (tests/capacity/test_queue_pages.py checks it).
        head = queue.head(computed, max_waiting).model_dump_json(exclude={"waiting", "next_offset"}).encode()
        positions: dict[str, list[int]] = {}
        public = []
        for i, (job_id, note) in enumerate(computed.order):
            public.append(_public_json(computed, job_id, note))
            positions.setdefault(computed.waiting[job_id].team, []).append(i)
        return cls(computed, head[:-1], public, positions)

    def page_json(self, session: Session, team: str, team_id: uuid.UUID, *, limit: int, offset: int) -> bytes:
        """The same JSON as queue.view(...) dumped: the shared entries sliced, the caller's own
        team's entries in that slice built afresh."""
        c = self.computed
        end = min(offset + limit, len(c.order))
        entries = self.public[offset:end]
        ours = self.positions.get(team, [])
        mine = ours[bisect.bisect_left(ours, offset):bisect.bisect_left(ours, end)]
        if mine:
            own = queue.own_rows(session, [c.order[i][0] for i in mine], team_id)
            for i in mine:
                job_id, note = c.order[i]
                if job_id in own:
                    entries[i - offset] = queue.entry(c, job_id, note, own[job_id]).model_dump_json().encode()
        next_offset = offset + limit if offset + limit < len(c.order) else None
        return b"".join((self.head, b',"waiting":[', b",".join(entries), b'],"next_offset":',
                         to_json(next_offset), b"}"))


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
