"""The name lookups of webhook deliveries: a fixed number of threads for the process, and one
lookup per name in flight, however many deliveries and passes wait for it.

getaddrinfo cannot be interrupted: a delivery that gives up (its timeout) leaves its lookup
running until the system resolver gives up too. Each dispatcher pass used to get a pool of its
own, so a name whose server never answers left another pool's worth of waiting threads behind
every pass (a pass a second, a resolver that waits 30 s: hundreds of threads). Here the threads
are at most `threads` (TRAINJOBS_WEBHOOK_DELIVERY_CONCURRENCY), daemons (a stopping service does
not wait for a silent name server), and every delivery to one name waits on the one lookup
already asked: a member's silent name holds one thread, not one per delivery. A lookup queued
behind busy threads runs when one is free; its waiters' own timeouts bound how long they wait.

One team's names may hold at most half of the threads (`per_owner`, at least one): a team
whose webhooks point at many silent names cannot take every thread from the others'
deliveries. A lookup past its team's share is refused at once (`Busy`); the delivery fails
saying so and is retried with its backoff."""
from __future__ import annotations

import asyncio
import queue
import socket
import threading
from concurrent.futures import Future

Key = tuple[str, int]


class Busy(Exception):
    """Every lookup thread this team's deliveries may hold is waiting on a name server."""


class Lookups:
    def __init__(self, threads: int, resolve=socket.getaddrinfo) -> None:
        if threads < 1:
            raise ValueError("a lookup needs a thread")
        self.threads = threads
        self.per_owner = max(1, threads // 2)
        self._owners: dict[Key, object] = {}       # who asked each lookup in flight
        self._owned: dict[object, int] = {}        # lookups in flight per owner
        self._resolve = resolve   # the system resolver; a test's own to count the calls
        self._queue: queue.SimpleQueue[tuple[Key, Future]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_flight: dict[Key, Future] = {}
        self._started = 0
        self._idle = 0      # threads waiting for a lookup, none of them claimed yet
        self._backlog = 0   # lookups queued while every thread was busy

    def submit(self, host: str, port: int, owner: object = None) -> Future:
        """The lookup of (host, port) already in flight (whoever asked it), or a new one queued
        for `owner` (a team id; None: no share). Raises Busy past the owner's share."""
        key = (host, port)
        with self._lock:
            future = self._in_flight.get(key)
            if future is None:
                if owner is not None:
                    if self._owned.get(owner, 0) >= self.per_owner:
                        raise Busy(f"{self.per_owner} name lookups of this team's webhooks are already waiting "
                                   "on slow name servers")
                    self._owned[owner] = self._owned.get(owner, 0) + 1
                    self._owners[key] = owner
                future = Future()
                self._in_flight[key] = future
                self._queue.put((key, future))
                if self._idle:
                    self._idle -= 1     # an idle thread takes it
                elif self._started < self.threads:
                    # A thread more only when none is idle, up to the bound: an idle process holds none.
                    self._started += 1
                    threading.Thread(target=self._work, name=f"webhook-lookup-{self._started}", daemon=True).start()
                else:
                    self._backlog += 1  # the first thread to finish takes it
            return future

    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def started(self) -> int:
        with self._lock:
            return self._started

    async def resolve(self, host: str, port: int, owner: object = None) -> list:
        """getaddrinfo(host, port, SOCK_STREAM)'s answer (Busy: see submit). Cancelling the
        caller (its delivery's timeout) leaves the shared lookup to the others waiting on it."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def done(f: Future) -> None:
            try:
                loop.call_soon_threadsafe(_settle, waiter, f)
            except RuntimeError:
                pass  # the caller's loop is closed: it stopped waiting long ago

        self.submit(host, port, owner).add_done_callback(done)
        return await waiter

    def _work(self) -> None:
        while True:
            key, future = self._queue.get()
            try:
                result = self._resolve(key[0], key[1], type=socket.SOCK_STREAM)
            except BaseException as e:  # noqa: BLE001 - handed to every waiter
                error: BaseException | None = e
            else:
                error = None
            with self._lock:
                # The next delivery to this name asks afresh: an answer is never kept.
                del self._in_flight[key]
                owner = self._owners.pop(key, None)
                if owner is not None:
                    left = self._owned[owner] - 1
                    if left:
                        self._owned[owner] = left
                    else:
                        del self._owned[owner]
                # Idle (or taking the backlog's next) before anyone can ask again: a thread
                # is started only when none is idle.
                if self._backlog:
                    self._backlog -= 1
                else:
                    self._idle += 1
            if future.cancelled():
                continue   # nobody here cancels one; a thread must outlive anyone who does
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)


def _settle(waiter: asyncio.Future, f: Future) -> None:
    if waiter.done():
        return  # cancelled: its delivery gave up
    error = f.exception()
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(f.result())


_PROCESS: dict[int, Lookups] = {}
_PROCESS_LOCK = threading.Lock()


def for_process(threads: int) -> Lookups:
    """The process's lookups with this bound: a dispatcher made again (another controller
    term, an app started again in one process) shares the threads its predecessor left."""
    with _PROCESS_LOCK:
        found = _PROCESS.get(threads)
        if found is None:
            found = _PROCESS[threads] = Lookups(threads)
        return found
