"""One controller per machine: the process that runs the reconciler and owns the
local backend's replica processes. With `serve --workers N` every worker serves the
API, and exactly one of them (whoever holds this lock) is also the controller; if it
dies the OS releases the lock and another worker takes over."""
from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import Callable

log = logging.getLogger("trainjobs.controller")


class ControllerLock:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class Standby:
    """In a worker that is not the controller: try for the lock every few seconds and
    call `promote` once it is ours."""

    def __init__(self, lock: ControllerLock, promote: Callable[[], None], interval: float = 2.0) -> None:
        self.lock = lock
        self.promote = promote
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="controller-standby", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.lock.try_acquire():
                log.info("this worker (pid %d) is now the controller", os.getpid())
                try:
                    self.promote()
                except Exception:
                    log.exception("promotion to controller failed")
                return
