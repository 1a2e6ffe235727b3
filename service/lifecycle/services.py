"""Loop services the controller runs besides its backend loops (e.g. webhook deliveries).

The app hands the Controller factories; on promotion each is called with the controller's
fencing epoch and the service it returns is started, on demotion it is stopped. So a
service runs in the one controller process per database, and its writes can carry the
epoch as the backend loops' do. Both run on a LoopThread: `run_once()` is one pass (tests
call it), `start()` runs it every `interval` on a thread of its own, `wake()` cuts the wait
short."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from service.lifecycle.engine import Deposed

log = logging.getLogger("trainjobs.controller")


class LoopThread:
    """The thread every controller loop runs on (the backend loops and the loop services):
    start, stop, wake, and a loop that runs a pass, steps down on Deposed, logs anything else
    and keeps looping (the database may be down), then waits until the next pass is due or
    someone wakes it. Subclasses say what a pass is and how long to wait after it."""

    name = "service"

    def __init__(self) -> None:
        self.on_deposed: Callable[[], None] | None = None   # set by the controller
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def _pass(self) -> float:
        """One pass in the thread; the seconds to wait before the next (0: at once)."""
        raise NotImplementedError

    def _failed(self) -> float:
        """A pass raised (it is logged); the seconds to wait before the next."""
        raise NotImplementedError

    def _settle(self, ended: float) -> bool:
        """After the wait (woken early, perhaps): True to stop looping. Default: go on."""
        return False

    @property
    def label(self) -> str:
        return self.name

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"controller-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self._pass()
            except Deposed as e:
                log.error("%s: %s; this process stops controlling", self.label, e)
                if self.on_deposed:
                    self.on_deposed()
                return
            except Exception:  # the database may be down: keep looping
                log.exception("%s: pass failed", self.label)
                wait = self._failed()
            ended = time.monotonic()
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
            if self._settle(ended):
                return


class LoopService(LoopThread):
    """A loop service: `run_once()` is one pass (tests call it); the thread runs it every
    `interval`, at once again while it says there is more to do."""

    def __init__(self, *, interval: float) -> None:
        super().__init__()
        self.interval = interval

    def run_once(self) -> bool:
        """One pass. True: there is more to do at once (skip the wait)."""
        raise NotImplementedError

    def _pass(self) -> float:
        return 0.0 if self.run_once() else self.interval

    def _failed(self) -> float:
        return self.interval


# Called at each promotion with the new fencing epoch.
ServiceFactory = Callable[[int], LoopService]
