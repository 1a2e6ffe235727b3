"""Finding and stopping a replica's processes, also after a service restart.

Each replica's wrapper leads its own process group (pgid = wrapper pid); the
command and anything it spawns live in that group and carry the marker
variable MARKER=<job id>/<task name>. A pid alone could have been reused by
the time a restarted service looks, so a process counts as ours only if its
start time matches the one recorded at launch, or it carries our marker."""
from __future__ import annotations

import os
import signal

import psutil

MARKER = "TRAINJOBS_LOCAL_REPLICA"
_START_TIME_SLACK = 0.05  # seconds; psutil derives create_time from boot time and ticks


def marker_value(job_id, task: str) -> str:
    return f"{job_id}/{task}"


def start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def is_alive(pid: int, created: float | None) -> bool:
    """True if `pid` is still the process we started (not a zombie, not a reused pid)."""
    try:
        p = psutil.Process(pid)
        if created is not None and abs(p.create_time() - created) > _START_TIME_SLACK:
            return False
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_members(pgid: int, marker: str) -> list[int]:
    """Live processes of group `pgid` that are ours (carry `marker`)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []  # the cheap, common answer: nobody is left
    except PermissionError:
        pass  # someone else's group may have taken the number; the scan decides
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE or os.getpgid(p.pid) != pgid:
                continue
            if p.environ().get(MARKER) == marker:
                found.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return found


def find_marked(marker: str) -> list[int]:
    """Every live process carrying `marker`, in any group (for a launch cut short by a crash)."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(MARKER) == marker:
                found.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return found


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_pids(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
