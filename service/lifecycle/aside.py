"""A controller loop's long read-only work (the plan: 10,000 waiting jobs read and ordered) on a
thread of its own, while the loop's thread goes on serving what must not wait for it: a cancel
asked meanwhile is sent and written at once, not after the plan (issue 51.3: a cancel waited for
the plan under way, 2-3 s on a loaded host).

Only the loop's thread calls the backend (its submit, poll and cancel never race each other): the
work set aside must not. It reads the database through a session of its own, which no other
thread touches until it has ended; what it decides is carried out by the loop's thread after."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Asked:
    """A cancel (or anything else a full pass does) asked of a loop while its plan is under way."""

    def __init__(self) -> None:
        self.attention = threading.Event()
        self._asked = False
        self._lock = threading.Lock()   # an ask between take's read and its reset is not lost

    def ask(self) -> None:
        with self._lock:
            self._asked = True
        self.attention.set()

    def take(self) -> bool:
        """Whether it was asked since the last take (and no longer)."""
        with self._lock:
            asked, self._asked = self._asked, False
        return asked


def beside(work: Callable[[], T], asked: Asked, name: str, *serve: Callable[[], None]) -> T:
    """work() on a thread of its own; meanwhile, each time `asked` is asked, each of `serve` in
    turn on this thread. Returns what work returned, or raises what it raised (or what serve
    raised, once the work has ended: its session is never closed under it)."""
    done = threading.Event()
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as e:  # handed to the caller's thread, which raises it
            out["error"] = e
        finally:
            done.set()
            asked.attention.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        while not done.is_set():
            asked.attention.wait()
            asked.attention.clear()
            if not done.is_set() and asked.take():
                for step in serve:
                    step()
    finally:
        done.wait()
        thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]

