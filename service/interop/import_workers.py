"""The API side of the import workers: a few processes that parse untrusted import text.

Why processes: PyYAML and shlex are pure Python. A 64 KiB source parsed in a request thread
held the GIL for 100-200 ms at a time, and /healthz and every other request waited for it
(bench/import_bombs.py). In a worker the API process only waits on a pipe.

Why not concurrent.futures.ProcessPoolExecutor: a running task cannot be stopped there
(killing its process breaks the whole pool, failing every other import in flight), and its
spawn/forkserver children import the parent's __main__ (the web app). Here each worker is
one `python -m service.interop.parse_worker` child of its own: an overrun kills that one,
the next import starts a new one.

Bounds (TRAINJOBS_IMPORT_*): WORKERS parse at once; QUEUE more wait, each at most as long as
the queue ahead of it takes to drain if every parse ran to its limit; past that, or with the
queue full, 503 with Retry-After. An import's parses together get PARSE_TIMEOUT_SECONDS of
wall time (the worker is then killed: 422), and as much CPU (RLIMIT_CPU in the worker, in
case this process is not there to kill it); WORKER_MEMORY_MB of address space (a MemoryError
in the worker: 422)."""
from __future__ import annotations

import io
import logging
import math
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import service
from service.core.errors import Invalid, Problem, Unavailable
from service.core.frames import HEADER, READY
from service.core.off_seat import waiting_elsewhere
from service.interop.settings import InteropEnv

log = logging.getLogger(__name__)

# The package's own root first on the worker's path: the worker runs this very code.
_ROOT = str(Path(service.__file__).resolve().parent.parent)
# Where a worker's answer may come from: plain data, and what PyYAML's safe loader builds.
_ALLOWED = {("datetime", "datetime"), ("datetime", "date"), ("datetime", "timezone"), ("datetime", "timedelta"),
            ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray")}


class _AnswerUnpickler(pickle.Unpickler):
    # A worker parses hostile text; its answer is read back as data, never as arbitrary objects.
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not import data")
        return super().find_class(module, name)


class _Failed(Exception):
    """The worker cannot be used again (killed, dead, or out of step)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class _Worker:
    def __init__(self, memory_bytes: int, start_seconds: float):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, "-m", "service.interop.parse_worker", str(memory_bytes)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        self.pid = self.proc.pid
        try:
            ready = self._read(time.monotonic() + start_seconds, len(READY) + HEADER.size)
        except _Failed:
            self.kill()
            raise
        if ready != READY:
            self.kill()
            raise _Failed(Unavailable("an import worker did not start properly; try again",
                                      headers={"Retry-After": "1"}))

    def call(self, request: bytes, deadline: float, max_answer: int) -> tuple:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(HEADER.pack(len(request)) + request)
            self.proc.stdin.flush()
        except OSError:
            raise _Failed(self._died()) from None
        body = self._read(deadline, max_answer)
        try:
            return _AnswerUnpickler(io.BytesIO(body)).load()
        except Exception as e:  # noqa: BLE001 - any undecodable answer means the worker is out of step
            log.warning("import worker %d gave an unreadable answer: %s", self.pid, e)
            raise _Failed(_unavailable("an import worker answered nonsense")) from None

    def _read(self, deadline: float, max_size: int) -> bytes:
        """One frame from the worker, by the deadline; _Failed otherwise (the caller kills it)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        want = HEADER.size
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while len(buf) < want:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, math.ceil(left * 1000))):
                if time.monotonic() >= deadline:
                    raise _Failed(TimeoutError())
                continue
            try:
                chunk = os.read(fd, want - len(buf))
            except OSError:
                chunk = b""
            if not chunk:
                raise _Failed(self._died())
            buf += chunk
            if want == HEADER.size and len(buf) == HEADER.size:
                (size,) = HEADER.unpack(buf)
                if size > max_size:
                    log.warning("import worker %d sent a %d-byte answer (at most %d)", self.pid, size, max_size)
                    raise _Failed(_unavailable("an import worker's answer was too large"))
                buf.clear()
                want = size
        return bytes(buf)

    def _died(self) -> Exception:
        try:
            code = self.proc.wait(timeout=1)  # its answer pipe closed: it is exiting
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if code == -24:  # SIGXCPU: the worker's RLIMIT_CPU, its own backstop for the wall-time bound
            return TimeoutError()
        log.warning("import worker %d stopped with status %d", self.pid, code)
        return _unavailable(f"an import worker stopped unexpectedly (status {code})")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def _unavailable(why: str) -> Unavailable:
    return Unavailable(f"{why}; try again", headers={"Retry-After": "1"})


class ImportWorkers:
    def __init__(self, settings: InteropEnv):
        self.size = settings.import_workers
        self.queue = settings.import_queue
        self.timeout = settings.import_parse_timeout_seconds
        self.memory_mb = settings.import_worker_memory_mb
        self.start_seconds = settings.import_worker_start_seconds
        # An answer holds at most the source's text and its expanded values, pickled: anything
        # bigger is not an answer to what was sent.
        self.max_answer = 8 * (settings.import_max_bytes + settings.import_max_yaml_expanded_bytes
                               + 64 * settings.import_max_yaml_nodes)
        # A queued import waits at most as long as the queue ahead of it takes to drain, every parse
        # running to its limit; a worker is then free for it unless the service is overloaded.
        self.max_wait = self.timeout * (1 + math.ceil(self.queue / self.size))
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._leased = 0   # imports holding a worker (or starting one)
        self._waiting = 0
        self._closed = False

    @property
    def busy(self) -> int:
        """Imports holding a worker now."""
        with self._cond:
            return self._leased

    @property
    def waiting(self) -> int:
        with self._cond:
            return self._waiting

    def pids(self) -> list[int]:
        """The live workers' process ids."""
        with self._cond:
            return sorted(w.pid for w in [*self._idle, *self._busy])

    @contextmanager
    def lease(self) -> Iterator[Lease]:
        """A worker for one import, or Unavailable (503) when all are busy and the queue is full."""
        self._admit()
        lease = Lease(self)
        try:
            yield lease
        finally:
            self._give_back(lease.worker)

    def _admit(self) -> None:
        retry = {"Retry-After": str(max(1, math.ceil(self.timeout)))}
        with self._cond:
            if self._closed:
                raise Unavailable("the service is stopping", headers=retry)
            if self._leased >= self.size:
                if self._waiting >= self.queue:
                    raise Unavailable(f"every import worker is busy and {self.queue} imports wait already "
                                      "(TRAINJOBS_IMPORT_WORKERS, TRAINJOBS_IMPORT_QUEUE); try again",
                                      headers=retry)
                self._waiting += 1
                try:
                    ready = self._cond.wait_for(lambda: self._closed or self._leased < self.size, self.max_wait)
                finally:
                    self._waiting -= 1
                if self._closed:
                    raise Unavailable("the service is stopping", headers=retry)
                if not ready:
                    raise Unavailable("no import worker was free in time; try again", headers=retry)
            self._leased += 1

    def _take(self) -> _Worker:
        with self._cond:
            if self._closed:
                raise Unavailable("the service is stopping", headers={"Retry-After": "1"})
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    self._busy.add(worker)
                    return worker
                log.warning("idle import worker %d had stopped (status %s)", worker.pid, worker.proc.returncode)
                worker.kill()
        try:
            worker = _Worker(self.memory_mb * 1024 * 1024, self.start_seconds)
        except _Failed as e:
            if isinstance(e.error, TimeoutError):
                raise _unavailable(f"an import worker did not start within {self.start_seconds} s "
                                   "(TRAINJOBS_IMPORT_WORKER_START_SECONDS)") from None
            raise e.error from None
        except OSError as e:
            log.error("cannot start an import worker: %s", e)
            raise _unavailable("cannot start an import worker") from None
        with self._cond:
            if self._closed:
                worker.kill()
                raise Unavailable("the service is stopping", headers={"Retry-After": "1"})
            self._busy.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._cond:
            self._busy.discard(worker)

    def _give_back(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is not None and worker in self._busy:
                self._busy.discard(worker)
                if self._closed:
                    worker.kill()
                else:
                    self._idle.append(worker)
            self._leased -= 1
            self._cond.notify()

    def close(self) -> None:
        """Kill every worker (an import in flight answers 503); later imports answer 503."""
        with self._cond:
            self._closed = True
            idle, busy = list(self._idle), list(self._busy)
            self._idle.clear()
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
        for worker in busy:
            # A signal only: the thread that leased it is reading its pipe, sees it end, and
            # reaps it and closes the pipe itself (closing an fd another thread reads is unsafe).
            worker.proc.kill()


class Lease:
    """One import's worker and its time: every parse of the import shares one deadline."""

    def __init__(self, pool: ImportWorkers):
        self.pool = pool
        self.worker: _Worker | None = None
        self.deadline: float | None = None

    def run(self, op: str, *args: Any) -> Any:
        pool = self.pool
        if self.worker is None:
            self.worker = pool._take()  # a new worker's start is not the import's time
        if self.deadline is None:
            self.deadline = time.monotonic() + pool.timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(pool.timeout)
        request = pickle.dumps((op, args, left), protocol=pickle.HIGHEST_PROTOCOL)
        worker = self.worker
        try:
            with waiting_elsewhere():   # the parse runs in the worker: this request's seat is free meanwhile
                answer = worker.call(request, self.deadline, pool.max_answer)
        except BaseException as e:
            # Whatever went wrong, its answer may still be on the way: this worker is out of step.
            self.worker = None
            pool._discard(worker)
            if not isinstance(e, _Failed):
                raise
            if pool._closed:
                raise Unavailable("the service is stopping", headers={"Retry-After": "1"}) from None
            if isinstance(e.error, TimeoutError):
                raise _timed_out(pool.timeout) from None
            raise e.error from None
        if answer[0] == "ok":
            return answer[1]
        if answer[0] == "invalid":
            raise Invalid.of([Problem(*p) for p in answer[1]])
        self.worker = None  # ("memory",): the worker exits after saying so
        pool._discard(worker)
        raise Invalid.of([Problem("source", f"needs more than {pool.memory_mb} MiB to read",
                                  "send a smaller source, or raise TRAINJOBS_IMPORT_WORKER_MEMORY_MB")])


def _timed_out(seconds: float) -> Invalid:
    return Invalid.of([Problem("source", f"took more than {seconds:g} s to read",
                               "send a smaller or simpler source, or raise TRAINJOBS_IMPORT_PARSE_TIMEOUT_SECONDS")])
