"""Workers of `serve --workers N` die with their supervisor.

uvicorn's supervisor starts the workers; if it is killed (kill -9, OOM) they
would go on serving as orphans, holding the port, and the next start would fail
with "Address already in use". Linux's PR_SET_PDEATHSIG sends each worker
SIGTERM the moment its parent dies; the check after it closes the race where the
parent died before the worker asked."""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

log = logging.getLogger("trainjobs.supervision")
SUPERVISOR_ENV = "TRAINJOBS_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1


def die_with_supervisor() -> None:
    raw = os.environ.get(SUPERVISOR_ENV)
    if not raw or not sys.platform.startswith("linux"):
        return
    supervisor = int(raw)
    if os.getpid() == supervisor:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    if os.getppid() != supervisor:
        log.error("the supervisor (pid %d) is already gone; this worker stops", supervisor)
        os.kill(os.getpid(), signal.SIGTERM)
