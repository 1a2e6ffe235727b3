"""The sim's poll at a scheduler benchmark's scale (issue 51.1: Kueue's 15,000 jobs): it reads
nothing per job but the handle (a handle's compiled spec is a database read; here a loader that
fails), and what it keeps in memory (preemptions not yet reported) is forgotten once reported."""
from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from service.backends.sim.backend import FORGET_AFTER_PASSES, SimBackend
from service.backends.sim.runs import SimRun
from service.backends.sim.settings import SimSettings
from service.lifecycle.protocol import JobHandle, PermanentBackendError
from service.lifecycle.states import JobState

S = JobState
JOBS = 15_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _no_compiled():
    raise AssertionError("poll read a job's compiled spec (a database read per job)")


def _handles(state: S, runs: list[SimRun]) -> list[JobHandle]:
    return [JobHandle(uuid.uuid4(), state, run.ref, _no_compiled, datetime.now(UTC)) for run in runs]


def _backend(clock: Clock) -> SimBackend:
    return SimBackend(SimSettings(speed=1.0, default_duration_seconds=60, max_duration_seconds=86_400), clock=clock)


def test_a_poll_of_15000_jobs_reads_nothing_per_job():
    clock = Clock()
    sim = _backend(clock)
    start = int(clock.now * 1000)
    runs = [SimRun(start, 10_000 + i, exit_code=i % 2) for i in range(JOBS)]
    pending, running = _handles(S.PENDING, runs[:100]), _handles(S.RUNNING, runs[100:])
    sim.begin_pass()
    seen = sim.poll(pending + running)
    assert [o.state for o in seen] == [S.RUNNING] * 100       # PENDING -> RUNNING; the running: no news
    clock.now += 30   # past every end (10 s + up to 15 s)
    ended = sim.poll(running)
    assert len(ended) == JOBS - 100
    assert {o.state for o in ended} == {S.SUCCEEDED, S.FAILED}
    assert all(o.ended_at == datetime.fromtimestamp((start + 10_000 + i + 100) / 1000, UTC)
               for i, o in enumerate(ended))


def test_a_preemption_is_reported_then_forgotten():
    clock = Clock()
    sim = _backend(clock)
    (job,) = _handles(S.RUNNING, [SimRun(int(clock.now * 1000), 60_000, 0)])
    sim.preempt(job, grace_seconds=30)
    clock.now += 1
    sim.begin_pass()
    (obs,) = sim.poll([job])
    assert obs.state == S.CANCELLED and obs.backend_ref.endswith(f";stop={int((clock.now - 1) * 1000)};by=preempted")
    for _ in range(FORGET_AFTER_PASSES):
        sim.begin_pass()
        assert sim.poll([job]) != []      # not yet applied (the job is still polled): reported again
    for _ in range(FORGET_AFTER_PASSES + 1):
        sim.begin_pass()                  # applied: the job is polled no more
    assert sim._stops == {}


def test_a_job_without_a_run_is_cancelled_or_failed_by_what_its_row_says():
    sim = _backend(Clock())
    never = JobHandle(uuid.uuid4(), S.CANCELLING, None, _no_compiled, datetime.now(UTC))
    (cancelled,) = sim.poll([never])
    assert cancelled.state == S.CANCELLED
    assert sim.poll([JobHandle(uuid.uuid4(), S.PENDING, None, _no_compiled, datetime.now(UTC))]) == []
    (lost,) = sim.poll([JobHandle(uuid.uuid4(), S.RUNNING, "elsewhere:/runs/1", _no_compiled, datetime.now(UTC))])
    assert lost.state == S.FAILED and "'elsewhere:/runs/1' is not a reference the sim backend wrote" in lost.reason


def test_a_label_the_settings_refuse_since_the_submit_fails_the_launch_saying_so():
    from service import jobspec
    from tests.backends.localkit import spec

    _, compiled = jobspec.build(spec(["x"]), [], {}, None, display_name="t", labels={"sim-duration-seconds": "100"})
    sim = SimBackend(SimSettings(speed=1.0, default_duration_seconds=10, max_duration_seconds=50))
    job = JobHandle(uuid.uuid4(), S.QUEUED, None, compiled, datetime.now(UTC))
    with pytest.raises(PermanentBackendError, match=r"labels.sim-duration-seconds: '100' is not a duration the sim "
                                                    r"runs: a whole number of seconds from 0 to 50"):
        sim.submit(job)   # never shortened to 50 s without a word
