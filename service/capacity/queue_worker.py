"""The queue's worker: a process that computes each backend's queue for one API process
(capacity/queue_process.py starts it, one per API process, and kills it with the app).

Why a process: with 10,000 waiting jobs a computation (the planner's snapshot, the forecast's
plays, the ready pages) is 2.5-3.3 s of Python; on a thread of the API process it held the GIL
that every request's thread needs, and reads beside it took 200-500 ms (bench/README.md, issue
51.4). Here the API process only waits on a pipe, then takes the ready bytes.

Run as `python -m service.capacity.queue_worker`. It reads frames on stdin and answers on stdout,
one at a time, each 4 bytes of length (big-endian) then a pickle. The first frame is its
configuration (the database URL, the capacity settings as a dict); it answers READY. Then each
request is (backend, slots, policy: the API process's Planner policy as its controller's passes
told it, capacity/passes.py, which the forecast plays); the answer ("ok", Prepared.wire()) or ("error", words). It reads the
database only (the planner's snapshot, read-only: the controller alone acts), with one connection
of its own. It imports the capacity domain, the scheduler and SQLAlchemy (no web app, no
TensorFlow). It exits when stdin closes."""
from __future__ import annotations

import logging
import os
import pickle
import sys
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from service.capacity.planner import Planner
from service.capacity.queue import Computed
from service.capacity.queue_pages import Prepared
from service.capacity.settings import CapacitySettings
from service.core.clock import utcnow
from service.core.frames import READY, read_frame, write_frame

log = logging.getLogger("trainjobs.capacity.queue_worker")


def compute(planner: Planner, session_factory: sessionmaker[Session], backend: str, slots: int | None,
            now: datetime | None = None) -> Prepared:
    """One backend's queue, read-only, made ready for its reads (here or on the queue's thread)."""
    with session_factory() as session:
        snap = planner.snapshot(session, backend, slots=slots, forecast=True)
    at = now or utcnow()
    computed = Computed.of(snap, planner.decide(snap, at), at, planner.policy)
    return Prepared.of(computed, max_waiting=planner.settings.max_waiting)


def _answer(planner: Planner, session_factory: sessionmaker[Session], request: bytes) -> bytes:
    backend, slots, policy = pickle.loads(request)
    # The API process's policy as its controller's passes told it (capacity/passes.py): this
    # process hears no pass, so the forecast plays the passes the API process heard.
    planner.policy = policy
    try:
        return pickle.dumps(("ok", compute(planner, session_factory, backend, slots).wire()), protocol=5)
    except Exception as e:  # noqa: BLE001 - the API process answers 503 and logs; this one keeps serving
        log.exception("the queue of %s could not be computed", backend)
        return pickle.dumps(("error", f"{type(e).__name__}: {e}"), protocol=5)


def main() -> int:
    from service.persistence.session import make_engine, make_session_factory

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr     # nothing but frames on the answer pipe
    config = read_frame(stdin)
    if config is None:
        return 0
    database_url, settings = pickle.loads(config)
    os.nice(settings["queue_worker_nice"])     # the API process's requests first (TRAINJOBS_QUEUE_WORKER_NICE)
    engine = make_engine(database_url, pool_size=1)
    planner, session_factory = Planner(CapacitySettings(**settings)), make_session_factory(engine)
    write_frame(stdout, READY)
    try:
        while (request := read_frame(stdin)) is not None:
            write_frame(stdout, _answer(planner, session_factory, request))
    except BrokenPipeError:
        pass                    # the API process is gone
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
