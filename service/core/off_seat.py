"""A request that waits on something other than its own process (a queue computation in the
queue's worker, an import parsed in a worker process, Google's APIs) gives its request seat
back while it waits, and takes its turn for one again afterwards (service/web/seats.py).

The seats bound the requests that run at once in a process because they share its GIL; a
request blocked on a pipe or a socket uses none of it, and holding a seat meanwhile left the
other teams' requests queued behind it (a few readers waiting for a queue computation held every
seat of a process with few of them). The admission middleware sets the hook for each request
(contextvars are copied into the route's thread); outside a request (the controller, tests,
the CLI) `waiting_elsewhere` does nothing.

Layer: core, so that any domain may say it waits without knowing about the web."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# (give the seat back, take one again): both called from the route's own thread.
HOOK: ContextVar[tuple[Callable[[], None], Callable[[], None]] | None] = ContextVar("trainjobs_off_seat", default=None)


@contextmanager
def waiting_elsewhere() -> Iterator[None]:
    """Wrap a blocking wait of a request's thread on another process or host."""
    hook = HOOK.get()
    if hook is None:
        yield
        return
    give_back, take_again = hook
    give_back()
    try:
        yield
    finally:
        take_again()
