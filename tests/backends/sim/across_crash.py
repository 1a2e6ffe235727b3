"""The app of tests/backends/sim/test_sim_across_kill9.py's first service: the sim under two names
(bench/sim_cohorts.py) and a controller that kills itself with SIGKILL at one step of placing a
job that accepts several backends (TRAINJOBS_TEST_KILL_AT, read here only: a test's, not a setting):

- decided: the pass's plan admits it somewhere; nothing written yet;
- claimed: its launch attempt, which claims it for one backend, is committed; not submitted;
- submitted: the backend's submit answered; the answer not written.

Run by uvicorn: `uvicorn tests.backends.sim.across_crash:create_app --factory`."""
from __future__ import annotations

import os
import signal

from bench.sim_cohorts import register
from service.app import create_app as service_app
from service.capacity.planner import Planner
from service.lifecycle.loop import BackendLoop

STEPS = ("decided", "claimed", "submitted")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install(step: str) -> None:
    placed: set = set()   # the jobs of several backends whose attempts this process claimed
    plan, mark, launch = Planner.plan, BackendLoop._mark_attempts, BackendLoop._launch

    def planned(self, *args, **kwargs):
        out = plan(self, *args, **kwargs)
        if step == "decided" and out.why:
            _die()
        return out

    def marked(self, session, rows, check, free, why):
        chosen = mark(self, session, rows, check, free, why)
        placed.update(row.id for row, _, _ in chosen if row.id in why)
        if step == "claimed" and placed:
            _die()
        return chosen

    def launched(self, session, row, *args, **kwargs):
        out = launch(self, session, row, *args, **kwargs)
        if step == "submitted" and row.id in placed:
            _die()
        return out

    Planner.plan, BackendLoop._mark_attempts, BackendLoop._launch = planned, marked, launched


def create_app():
    register(2)
    step = os.environ["TRAINJOBS_TEST_KILL_AT"]
    assert step in STEPS, step
    _install(step)
    return service_app()
