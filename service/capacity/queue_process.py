"""The API side of the queue's worker (capacity/queue_worker.py): one child process per API
process that computes each backend's queue, so that the computation's 2.5-3.3 s of Python (10,000
waiting) never hold this process's GIL. The queue's thread (capacity/queue_cache.py) calls
compute() and waits on the pipe; what comes back is the ready pages (capacity/queue_pages.py).

Started by the first computation (a process nobody asks the queue of starts none). Bounded: one
computation at a time; each, with the worker's start, gets TRAINJOBS_QUEUE_COMPUTE_TIMEOUT_SECONDS
of wall time, after which the worker is killed. A worker that dies, hangs past that or answers
nonsense is a failed computation (the readers that wait for it get 503; the others keep being
served the last one) and the next computation starts a new worker: never a hang, never a crash of
the API. close() kills it (the app's end); it also exits by itself when this process's end of the
pipe closes.

Why not multiprocessing: its spawn children import the parent's __main__ (the web app, the CLI);
this one is `python -m service.capacity.queue_worker`, the capacity domain alone (as
service/interop/import_workers.py does for the import parsers)."""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import service
from service.capacity.queue_pages import Prepared, loads
from service.capacity.settings import CapacitySettings
from service.core.errors import Unavailable
from service.core.frames import HEADER, READY
from service.scheduling.model import Policy

log = logging.getLogger("trainjobs.capacity.queue")

# The package's own root first on the worker's path: the worker runs this very code.
_ROOT = str(Path(service.__file__).resolve().parent.parent)


class WorkerFailed(Unavailable):
    """The computation did not come back (the worker died, hung or answered nonsense): a 503."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the queue could not be computed ({why}); try again", headers={"Retry-After": "1"})


class QueueProcess:
    def __init__(self, database_url: str, settings: CapacitySettings, *, timeout_seconds: float = 120.0) -> None:
        self.database_url, self.settings, self.timeout_seconds = database_url, settings, timeout_seconds
        self.started = 0            # workers started so far (tests and metrics read it)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()     # one computation at a time
        self._closed = False

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def compute(self, backend: str, slots: int | None, policy: Policy) -> Prepared:
        """`policy`: the planner's, as the controller's passes told it (capacity/passes.py)."""
        with self._lock:
            if self._closed:
                raise Unavailable("the service is stopping", headers={"Retry-After": "1"})
            deadline = time.monotonic() + self.timeout_seconds
            try:
                proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start(deadline)
                _write(proc, pickle.dumps((backend, slots, policy), protocol=5))
                answer = _read(proc, deadline)
                kind, value = loads(answer)
            except WorkerFailed:
                self._kill()
                raise
            except Exception as e:  # noqa: BLE001 - an unreadable answer: the worker is out of step
                log.warning("the queue worker answered nonsense: %s", e)
                self._kill()
                raise WorkerFailed("its worker answered nonsense") from None
        if kind != "ok":
            log.warning("the queue of %s could not be computed in the worker: %s", backend, value)
            raise WorkerFailed("an error in its worker, logged")
        return Prepared.from_wire(value)

    def _start(self, deadline: float) -> subprocess.Popen:
        self._kill()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen([sys.executable, "-m", "service.capacity.queue_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, close_fds=True)
        self._proc = proc
        self.started += 1
        if self._closed:            # close() came while it started: it would not have seen it
            raise WorkerFailed("the service is stopping")
        # The database URL goes through the pipe, never the command line (ps shows that to everyone).
        _write(proc, pickle.dumps((self.database_url, dataclasses.asdict(self.settings)), protocol=5))
        if _read(proc, deadline) != READY:
            raise WorkerFailed("its worker did not start properly")
        return proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass

    def close(self) -> None:
        """Kills the worker, at once: a computation under way fails (its waiting readers get 503)."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()             # without the lock: the computation holding it ends on the pipe's close
        with self._lock:
            self._kill()


def _write(proc: subprocess.Popen, body: bytes) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(HEADER.pack(len(body)) + body)
        proc.stdin.flush()
    except (OSError, ValueError):
        raise WorkerFailed(_ended(proc)) from None


def _read(proc: subprocess.Popen, deadline: float) -> bytes:
    """One frame from the worker by the deadline (waiting on the pipe, the GIL released)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    want, got, head = HEADER.size, 0, True
    while got < want:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerFailed("its worker took longer than TRAINJOBS_QUEUE_COMPUTE_TIMEOUT_SECONDS")
        if not poller.poll(max(1, math.ceil(left * 1000))):
            continue
        chunk = os.read(fd, min(want - got, 1 << 20))
        if not chunk:
            raise WorkerFailed(_ended(proc))
        chunks.append(chunk)
        got += len(chunk)
        if head and got == want:
            (want,), head, got, chunks = HEADER.unpack(b"".join(chunks)), False, 0, []
    return b"".join(chunks)


def _ended(proc: subprocess.Popen) -> str:
    try:
        code = proc.wait(timeout=1)     # its pipe closed: it is exiting
    except subprocess.TimeoutExpired:
        return "its worker closed its pipe"
    log.warning("the queue worker %d stopped with status %d", proc.pid, code)
    return f"its worker stopped with status {code}"
