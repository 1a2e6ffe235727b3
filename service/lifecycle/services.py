"""Loop services the controller runs besides its backend loops (e.g. webhook deliveries).

The app hands the Controller factories; on promotion each is called with the controller's
fencing epoch and the service it returns is started, on demotion it is stopped. So a
service runs in the one controller process per database, and its writes can carry the
epoch as the backend loops' do. Like BackendLoop: `run_once()` is one pass (tests call it),
`start()` runs it every `interval` on a thread of its own, `wake()` cuts the wait short."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from service.lifecycle.engine import Deposed

log = logging.getLogger("trainjobs.controller")


class LoopService:
    name = "service"

    def __init__(self, *, interval: float) -> None:
        self.interval = interval
        self.on_deposed: Callable[[], None] | None = None   # set by the controller
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> bool:
        """One pass. True: there is more to do at once (skip the wait)."""
        raise NotImplementedError

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
            more = False
            try:
                more = self.run_once()
            except Deposed as e:
                log.error("%s: %s; this process stops controlling", self.name, e)
                if self.on_deposed:
                    self.on_deposed()
                return
            except Exception:  # the database may be down: keep looping
                log.exception("%s: pass failed", self.name)
            if not more:
                self._wake.wait(self.interval)
                self._wake.clear()


# Called at each promotion with the new fencing epoch.
ServiceFactory = Callable[[int], LoopService]
