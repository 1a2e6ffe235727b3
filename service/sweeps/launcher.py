"""The controller's sweep loop service: starts each sweep's trials as room frees (never
more than max_parallel unfinished at once), stops a cancelled sweep's trials, and ends a
sweep when all its trials have ended.

Only the elected controller runs it (service.lifecycle.services), and each trial is
started in one transaction that holds the controller lease row (shared lock on
PostgreSQL) and inserts the (sweep, number) row together with the job: a deposed
controller starts nothing, and no trial is ever started twice. A trial whose job cannot
be created (the template was archived since, the backend disabled...) is recorded as
failed with the reason, not retried."""
from __future__ import annotations

import logging
import uuid

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service import jobspec
from service.budgets.service import LimitExceeded
from service.core.errors import Conflict, DomainError
from service.jobs.submitter import JobSubmitter, Submitted
from service.lifecycle.engine import LEASE, Deposed, Engine
from service.lifecycle.services import LoopService
from service.lifecycle.states import TERMINAL, JobState
from service.persistence.models import (
    ControllerLease,
    Job,
    JobEpoch,
    Sweep,
    SweepTrial,
    utcnow,
)
from service.sweeps import early_stop
from service.sweeps.attempts import CURRENT_JOB
from service.sweeps.schemas import SweepState
from service.sweeps.service import (
    LAUNCHER,
    actor_of,
    cancel_trials,
    job_key,
    pause,
    token_live,
    trial_body,
)

log = logging.getLogger("trainjobs.sweeps")
_TERMINAL_JOB = [s.value for s in TERMINAL]
_OPEN = [SweepState.RUNNING.value, SweepState.CANCELLING.value]


class SweepLauncher(LoopService):
    name = LAUNCHER

    def __init__(self, session_factory: sessionmaker[Session], engine: Engine, submitter: JobSubmitter, *,
                 interval: float, batch_size: int, fence: int | None) -> None:
        super().__init__(interval=interval)
        self.session_factory = session_factory
        self.engine = engine
        self.submitter = submitter   # trials are submitted like any job, and it wakes the controller
        self.batch_size = batch_size
        self.fence = fence
        self.started = 0    # trials this launcher started (tests, metrics)
        self.passes = 0
        self.errors = 0
        self._wake_after_commit: set[str] = set()

    def run_once(self) -> bool:
        with self.session_factory() as session:
            self._hold_fence(session)
            ids = list(session.scalars(select(Sweep.id).where(Sweep.state.in_(_OPEN))
                                       .order_by(Sweep.checked_at.asc().nullsfirst(), Sweep.created_at)
                                       .limit(self.batch_size)))
            session.rollback()
        for sweep_id in ids:
            if self.stopping:
                break
            try:
                self.advance(sweep_id)
            except Deposed:
                raise
            except Exception:  # one sweep's trouble (or the database's) must not stop the others
                self.errors += 1
                log.exception("sweep %s: pass failed", sweep_id)
        self.passes += 1
        return len(ids) >= self.batch_size and not self.stopping

    def _hold_fence(self, session: Session) -> None:
        """Within the caller's transaction: this controller's epoch is current, and (on
        PostgreSQL) stays so until the transaction ends, since a new controller's takeover
        writes that row."""
        if self.fence is None:
            return
        epoch = session.scalar(select(ControllerLease.epoch).where(ControllerLease.name == LEASE)
                               .with_for_update(read=True))
        if epoch != self.fence:
            raise Deposed(f"controller epoch {self.fence} is no longer current")

    def advance(self, sweep_id: uuid.UUID) -> None:
        """Start the trials there is room for, one transaction each, then settle the sweep."""
        while not self.stopping:
            with self.session_factory() as session:
                if not self._step(session, sweep_id):
                    return

    def _step(self, session: Session, sweep_id: uuid.UUID) -> bool:
        """One transaction. True: a trial was started (look again)."""
        self._hold_fence(session)
        self._wake_after_commit.clear()
        sweep = session.scalar(select(Sweep).where(Sweep.id == sweep_id).with_for_update())
        if sweep is None or sweep.state not in _OPEN:
            return False
        self._link_orphans(session, sweep)
        if sweep.state == SweepState.RUNNING.value and sweep.request.get("early_stopping"):
            self._stop_laggards(session, sweep)
        started, unfinished = self._counts(session, sweep_id)
        if sweep.state == SweepState.CANCELLING.value:
            # A trial started just before the cancel committed is stopped here.
            self._wake_after_commit |= cancel_trials(session, self.engine, sweep_id, actor="sweep", fence=self.fence)
        elif started < sweep.trial_count and unfinished < sweep.max_parallel:
            if token_live(session, sweep):
                return self._start(session, sweep, started + 1)
            # Revoked without the hook (e.g. in the database by hand): trials run as that token only
            # while it is live.
            pause(sweep, f"paused: token {sweep.actor.get('token_name')!r} ({sweep.actor['token_id']}), which "
                         "created it and launches its trials, is revoked; a member may resume it (its trials "
                         "then run as them) or cancel it")
            log.warning("sweep %s paused: its creator's token is revoked", sweep.id)
            session.commit()
            return False
        if unfinished == 0 and (started >= sweep.trial_count or sweep.state == SweepState.CANCELLING.value):
            self._end(session, sweep)
        sweep.checked_at = utcnow()
        session.commit()
        for backend in self._wake_after_commit:
            self.submitter.waker.wake(backend)   # cancels: a full pass
        self._wake_after_commit.clear()
        return False

    def _counts(self, session: Session, sweep_id: uuid.UUID) -> tuple[int, int]:
        """(trials started, trials not ended). A trial row without a job and without an
        error is one whose job is being created: it counts as unfinished."""
        started, unfinished = session.execute(
            select(func.count(), func.count().filter(or_(
                and_(SweepTrial.job_id.is_(None), SweepTrial.error.is_(None)),
                Job.state.not_in(_TERMINAL_JOB))))
            .select_from(SweepTrial).outerjoin(Job, Job.id == CURRENT_JOB)
            .where(SweepTrial.sweep_id == sweep_id)).one()
        return started, unfinished

    def _link_orphans(self, session: Session, sweep: Sweep) -> None:
        """Trials whose job committed but whose link did not (the process died between)."""
        for (number,) in session.execute(select(SweepTrial.number).where(
                SweepTrial.sweep_id == sweep.id, SweepTrial.job_id.is_(None), SweepTrial.error.is_(None))).all():
            job_id = session.scalar(select(Job.id).where(Job.team_id == sweep.team_id,
                                                         Job.idempotency_key == job_key(sweep.id, number)))
            values = {"job_id": job_id} if job_id else {"error": "its job was never created"}
            session.execute(update(SweepTrial).where(SweepTrial.sweep_id == sweep.id, SweepTrial.number == number)
                            .values(**values))

    def _stop_laggards(self, session: Session, sweep: Sweep) -> None:
        rule = sweep.request["early_stopping"]
        # The trials' running attempts (a trial goes on in its latest attempt), by job id.
        trial_of: dict[uuid.UUID, int] = {job_id: number for job_id, number in session.execute(
            select(Job.id, SweepTrial.number).select_from(SweepTrial).join(Job, Job.id == CURRENT_JOB).where(
                SweepTrial.sweep_id == sweep.id, SweepTrial.stopped_early.is_(None),
                Job.state == JobState.RUNNING.value))}
        running = set(trial_of)
        if not running:
            return
        value = JobEpoch.metrics[sweep.objective_metric].as_float()
        curves: dict[uuid.UUID, list[tuple[int, float]]] = {}
        for job_id, epoch, v in session.execute(
                select(JobEpoch.job_id, JobEpoch.epoch, value).join(SweepTrial, CURRENT_JOB == JobEpoch.job_id)
                .where(SweepTrial.sweep_id == sweep.id, value.is_not(None))
                .order_by(JobEpoch.job_id, JobEpoch.epoch)):
            curves.setdefault(job_id, []).append((epoch, float(v)))
        for verdict in early_stop.laggards(curves, running, metric=sweep.objective_metric, goal=sweep.objective_goal,
                                           min_epochs=rule["min_epochs"], min_trials=rule["min_trials"]):
            try:
                self.engine.move(session, verdict.job_id, JobState.CANCELLING, reason=verdict.reason, actor="sweep",
                                 fence=self.fence)
            except Conflict:
                continue   # it ended meanwhile
            session.execute(update(SweepTrial).where(SweepTrial.sweep_id == sweep.id,
                                                     SweepTrial.number == trial_of[verdict.job_id])
                            .values(stopped_early=verdict.reason))
            log.info("sweep %s: %s (job %s)", sweep.id, verdict.reason, verdict.job_id)
            self._wake_after_commit.add(sweep.backend)

    def _start(self, session: Session, sweep: Sweep, number: int) -> bool:
        """Start trial `number` (or record why it cannot start). False: it was there already."""
        sweep_id, body = sweep.id, trial_body(sweep, number)
        session.add(SweepTrial(sweep_id=sweep_id, number=number, parameters=sweep.plan[number - 1],
                               created_at=utcnow()))
        sweep.checked_at = sweep.updated_at = utcnow()
        try:
            session.flush()
            # Commits the trial row, the job and the sweep's timestamps together.
            result = self.submitter.submit(session, body, actor_of(sweep), idempotency_key=job_key(sweep_id, number),
                                           trial=jobspec.Trial(sweep_id, number))
        except LimitExceeded as e:
            # The team's budget is full now (refuse mode): the trial waits for room, like a
            # job in queue mode would, instead of failing. The next pass tries again.
            session.rollback()
            log.info("sweep %s: trial %d waits: %s", sweep_id, number, e.detail)
            return False
        except DomainError as e:
            session.rollback()
            log.warning("sweep %s: trial %d could not be created: %s", sweep_id, number, e.detail)
            self._hold_fence(session)
            session.add(SweepTrial(sweep_id=sweep_id, number=number, parameters=body.parameters,
                                   error=e.detail[:2000], created_at=utcnow()))
            session.commit()
            return True
        except IntegrityError:
            session.rollback()   # started already (cannot happen under one controller): next pass
            return False
        assert isinstance(result, Submitted)   # not a dry run
        # The submitter woke the controller for admission when the job committed.
        session.execute(update(SweepTrial).where(SweepTrial.sweep_id == sweep_id, SweepTrial.number == number)
                        .values(job_id=result.job.id))
        session.commit()
        self.started += 1
        return True

    def _end(self, session: Session, sweep: Sweep) -> None:
        if sweep.state == SweepState.CANCELLING.value:
            final = SweepState.CANCELLED
        else:
            succeeded = session.scalar(select(func.count()).select_from(SweepTrial)
                                       .join(Job, Job.id == CURRENT_JOB)
                                       .where(SweepTrial.sweep_id == sweep.id,
                                              Job.state == JobState.SUCCEEDED.value))
            final = SweepState.SUCCEEDED if succeeded else SweepState.FAILED
        now = utcnow()
        sweep.state, sweep.ended_at, sweep.updated_at = final.value, now, now
        log.info("sweep %s ended %s", sweep.id, final.value)
