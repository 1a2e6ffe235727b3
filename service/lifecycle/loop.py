"""One controller loop per backend, so one backend's outage never delays another's
jobs. A loop service in the Prefect style: `run_once()` is one pass and is what tests
call; `start()` runs it every interval on its own thread.

A pass: settle cancels, poll the launched jobs in batches, then admit QUEUED jobs and
submit them in the CapacityPlanner's order (fair share, priorities, the backend's launch
slots) after carrying out its preemptions (preempter.py). Only this thread calls
the backend's submit/poll/cancel, so none of them race each other. Every write goes
through lifecycle.engine with this controller's fencing epoch."""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from sqlalchemy import tuple_
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from service.core.clock import utcnow
from service.lifecycle import admission, applying, aside, bulk, held, observed, quiet, stalls
from service.lifecycle.engine import Engine
from service.lifecycle.handles import compiled_of, handle_of_row, read_handles
from service.lifecycle.preempter import Preempter
from service.lifecycle.protocol import (
    Backend,
    Observation,
    PermanentBackendError,
    TransientBackendError,
)
from service.lifecycle.services import LoopThread
from service.lifecycle.states import JobState
from service.persistence.models import Job

log = logging.getLogger("trainjobs.lifecycle.loop")
S = JobState


@dataclass
class TickStats:
    polled: int = 0
    changed: int = 0
    submitted: int = 0
    errors: int = 0
    seconds: float = 0.0
    planned: bool = False   # the planner was asked (quiet.py: not when nothing it reads changed)


def gap_left(previous_end: float, now: float, gap: float) -> float:
    """Seconds still to wait before the next pass, which starts at least `gap` after the last one ended."""
    return max(0.0, previous_end + gap - now)


class BackendLoop(LoopThread):
    def __init__(self, backend: Backend, session_factory: sessionmaker[Session], engine: Engine, *,
                 fence: int | None, interval: float = 0.5, batch_size: int = 500, wake_gap: float = 0.0,
                 on_tick: Callable[[TickStats], None] | None = None,
                 on_deposed: Callable[[], None] | None = None, gate: admission.AdmissionGate | None = None,
                 planner: admission.CapacityPlanner, preempt_grace: float = 30.0,
                 replan_seconds: float = quiet.REPLAN_SECONDS) -> None:
        super().__init__()
        self.backend = backend
        self.name = backend.name
        self.session_factory = session_factory
        self.engine = engine
        self.fence = fence
        self.interval = interval
        self.batch_size = batch_size
        self.wake_gap = wake_gap
        self.on_tick = on_tick
        self.on_deposed = on_deposed
        self.gate = gate
        self.planner = planner
        self.preempter = Preempter(backend, session_factory, engine, fence=fence, grace_seconds=preempt_grace,
                                   batch_size=batch_size)
        self._cancel_sent: set = set()   # jobs whose cancel this term has passed on
        self._full_asked = False   # a wake that needs more than admission (a cancel, a tool)
        self._full = True          # the pass under way is a full one
        self._full_ended = -math.inf   # when the last full pass ended (none yet): the next starts `interval` after
        self._pass_seconds = 0.0       # how long the last pass took (wall)
        # The last pass found no launch slot free and ordered no preemption: until a full pass
        # (a slot frees, or a new job preempts), a submit's admission pass could launch nothing.
        self._no_room = False
        self._held = held.Held(replan_seconds)    # teams the admission gate holds, with why
        self._quiet = quiet.Quiet(replan_seconds)
        # The planner's memory of this loop's waiting jobs between plans (this term only: a new
        # controller starts with a full read). A planner without one (a test's stand-in) keeps none.
        self._memo = getattr(planner, "new_memo", lambda: None)()
        self._asked = aside.Asked()   # a cancel asked while a plan is under way (aside.py)

    # -- one pass --------------------------------------------------------------------------
    def run_once(self) -> TickStats:
        stats = TickStats()
        t0 = time.perf_counter()
        self.backend.begin_pass()
        try:
            self._asked.take()      # this pass settles what was asked so far
            self._settle_cancels(stats)
            self._poll(stats)
            self._admit(stats, full=True)
        finally:
            self.backend.end_pass()
        stats.seconds = time.perf_counter() - t0
        if self.on_tick:
            self.on_tick(stats)
        return stats

    def _settle_cancels(self, stats: TickStats) -> None:
        with self.session_factory() as session:
            never = read_handles(session, [admission.waiting_cancelled(self.name)], limit=self.batch_size)
            for row in never:
                self._apply(session, Observation(row.id, state=S.CANCELLED,
                                                 reason="cancelled before it was launched"), stats,
                            actor="controller")
            rows = read_handles(session, [admission.cancelling(self.name)], limit=self.batch_size)
            session.rollback()
        for row in rows:
            if row.id in self._cancel_sent:
                continue
            handle = handle_of_row(self.session_factory, row)
            try:
                reached = self.backend.cancel(handle)
            except TransientBackendError as e:
                log.warning("job %s: cancel deferred: %s", row.id, e)
                continue
            except PermanentBackendError as e:
                # The job stays CANCELLING and ends however the backend ends it.
                log.error("job %s: %s refused the cancel: %s", row.id, self.name, e.message)
            except Exception:
                log.exception("job %s: cancel failed", row.id)
                stats.errors += 1
                continue
            else:
                if reached is not None:
                    with self.session_factory() as session:
                        self._apply(session, Observation(row.id, state=reached, reason="cancelled before it started"),
                                    stats)
            self._cancel_sent.add(row.id)

    def _poll(self, stats: TickStats) -> None:
        after = None
        while True:
            with self.session_factory() as session:
                where = [admission.launched_active(self.name)]
                if after is not None:
                    where.append(tuple_(Job.created_at, Job.id) > after)
                rows = read_handles(session, where, limit=self.batch_size)
                session.rollback()  # hold no transaction (nor SQLite snapshot) while the backend works
                if not rows:
                    return
                after = (rows[-1].created_at, rows[-1].id)
                handles = [handle_of_row(self.session_factory, r) for r in rows]
                stats.polled += len(handles)
                try:
                    observations = self.backend.poll(handles)
                except TransientBackendError as e:
                    # Expected (a 429, a 503): one line saying what, Google's answer and when.
                    log.warning("backend %s: poll deferred: %s", self.name, e)
                    stats.errors += 1
                    return
                except Exception:
                    log.exception("backend %s: poll failed; will retry next pass", self.name)
                    stats.errors += 1
                    return
                by_id = {h.id: h for h in handles}
                news = []
                for obs in observations:
                    if obs.silence is not None:
                        if obs.job_id in by_id:
                            obs = self._judge_silence(by_id[obs.job_id], obs)
                        if obs.state is None and dataclasses.replace(obs, silence=None) == Observation(obs.job_id):
                            continue   # a silence within the timeout is no news: no write, no read
                    news.append(obs)
                self._apply_all(session, news, stats)
                observed.stamp(session, self.backend.observed(handles))
            if len(rows) < self.batch_size:
                return

    def _judge_silence(self, handle, obs: Observation) -> Observation:
        """A stall (lifecycle/stalls.py) stops the job first, then fails it. A cancel that
        did not go out leaves the job RUNNING: the next pass judges (and stops) it again."""
        failed = stalls.judge(handle, obs)
        if failed is None:
            return obs
        try:
            self.backend.cancel(handle)
        except TransientBackendError as e:
            log.warning("job %s stalled, but stopping it is deferred: %s", obs.job_id, e)
            return dataclasses.replace(obs, silence=None)
        except PermanentBackendError as e:
            # Failed all the same: its replicas end by the backend's own timeout.
            log.error("job %s stalled; %s refused to stop it: %s", obs.job_id, self.name, e.message)
        except Exception:
            log.exception("job %s stalled; stopping it failed", obs.job_id)
            return dataclasses.replace(obs, silence=None)
        log.warning("job %s: %s", obs.job_id, failed.reason)
        return failed

    def run_admission(self) -> TickStats:
        """The part of a pass a new job needs: launch what may be launched. What a submit
        wakes; the full pass (cancels, polling) keeps its interval."""
        stats = TickStats()
        t0 = time.perf_counter()
        self._admit(stats)
        stats.seconds = time.perf_counter() - t0
        if self.on_tick:
            self.on_tick(stats)
        return stats

    def _admit(self, stats: TickStats, full: bool = False) -> None:
        with self.session_factory() as session:
            check = self.gate.start_pass() if self.gate is not None else None
            made = self._plan(session, check, stats, full)
            session.rollback()
            if made is None:
                # Nothing changed since a plan that decided nothing: it would decide nothing
                # again (and the last one's verdict on room stands).
                if full:
                    self.preempter.run([], resend=True)
                return
            plan, free = made
            # The plan's new orders; and on a full pass (or with new orders), the stops not
            # yet sent (a transient error, or a predecessor that recorded them and died): an
            # admission pass, one per burst of submits, need not read them again.
            self.preempter.run(plan.preempt, resend=full or bool(plan.preempt))
            self._no_room = free <= 0 and not plan.preempt
            # Gated, a pass reads every job the plan admits (the gate may hold some back),
            # but with no room it launches none of them: a backend at its limit with a long
            # queue read thousands of rows on each pass woken by a submit, for nothing.
            admitted = plan.admit[:max(free, 0)] if check is None else plan.admit if free > 0 else []
            rows = admission.in_plan_order(session, admitted)
            session.rollback()
            self._launch_rows(session, rows, check, free, stats, plan.why)

    def _launch_rows(self, session: Session, rows: list, check, free: int, stats: TickStats,
                     why: dict | None = None) -> None:
        """The admitted jobs' launches: their gate checks and launch attempts recorded and committed
        together (before any submit: whoever controls next knows an attempt may have been made),
        then each submitted, and what the backend answered written in one transaction. `why`: the
        jobs that accept several backends, and why here (their attempt claims them for this one)."""
        chosen = self._mark_attempts(session, rows, check, free, why or {})
        compiled = compiled_of(session, [row.id for row, _, _ in chosen])
        session.rollback()   # no transaction held while the backend works
        launched: list[Observation] = []
        for i, (row, prev, settling) in enumerate(chosen):
            stopping = self._stop.is_set()
            verdict, obs = (False, None) if stopping else self._launch(session, row, prev, settling, stats, compiled)
            if obs is not None:
                launched.append(obs)
            if verdict is False:
                # An error stops the pass:
                # the attempts recorded for jobs not submitted launched nothing; forgotten, so the
                # next pass tries them at once instead of waiting for them to settle.
                for r, p, s in chosen[i + (0 if stopping else 1):]:
                    if not s:
                        self.engine.clear_launch_attempt(session, r.id, p, fence=self.fence)
                session.commit()
                break
            # A job the backend holds back ("later") holds back nobody else: the plan is the order.
        self._apply_all(session, launched, stats)

    def _mark_attempts(self, session: Session, rows: list, check, free: int, why: dict) -> list[tuple]:
        """(row, previous attempt, settling) of each job to submit now, its attempt recorded and
        committed; [] when they could not be recorded (the pass stops). Recorded together (bulk.py),
        and before each gate check that reads: it counts the team's jobs being launched."""
        window = self.backend.capabilities.resubmit_after_seconds
        free_of_gate = getattr(check, "free", None)   # budgets/gate.py: a team it lets in without a read
        order: list[tuple] = []
        unmarked: list = []
        refused: set = set()

        def record() -> None:
            refused.update(set(unmarked) - bulk.mark_attempts(self.engine, session, unmarked, fence=self.fence))
            unmarked.clear()
        try:
            for row in rows:
                if self._stop.is_set() or (check is not None and free <= 0):
                    break
                prev = row.launch_attempted_at
                settling = prev is not None and window > 0 and (utcnow() - prev).total_seconds() < window
                if check is not None:
                    if row.team_id in self._held:
                        continue     # its team is held: its oldest job carries why
                    # Held back by the gate: it waits, with why; other teams' jobs may go (it keeps a team's in order).
                    reason = None
                    if prev is None and not (free_of_gate and free_of_gate(row.team_id)):
                        record()
                        reason = check(session, row.id)
                    if reason:
                        self._held[row.team_id] = reason
                        self._note_waiting(session, row.id, reason)
                        continue
                    free -= 1
                if not settling:
                    if row.id in why:
                        claim = (self.name, why[row.id])
                        if not self.engine.mark_launch_attempt(session, row.id, fence=self.fence, claim=claim):
                            continue  # moved, or claimed by another backend, since it was read
                    else:
                        unmarked.append(row.id)
                order.append((row, prev, settling))
            record()
            session.commit()
        except OperationalError:
            session.rollback()
            log.warning("%d launch attempts could not be recorded; next pass", len(order))
            return []
        return [entry for entry in order if entry[0].id not in refused]   # refused: cancelled since it was read

    def _plan(self, session: Session, check, stats: TickStats, full: bool) -> tuple[admission.Plan, int] | None:
        """This pass's plan and free launch slots (read only: what it decides is written by the
        caller, fenced, through the engine); None: nothing the plan reads has changed since the
        last one, which decided nothing (quiet.py), so neither the planner's read of every waiting
        job nor the gate's check of every held team is made again."""
        sig = quiet.signature(session, self.name, utcnow())
        if self._quiet.unchanged((*sig, frozenset(self._held)), time.monotonic()):
            return None
        caps = self.backend.capabilities
        free = admission.room(session, self.name, caps, self.batch_size)
        if check is not None and self._held:
            self._held.recheck(session, self.name, check, time.monotonic())
        # Planned on a thread of its own: a cancel asked meanwhile is served now, not after the plan
        # (aside.py): sent, and on a full pass (the backend's pass is open) polled until it ends.
        plan = aside.beside(lambda: self.planner.plan(session, self.name, utcnow(), explain=False, room=free,
                                                      slots=caps.max_running, held_teams=frozenset(self._held),
                                                      memo=self._memo), self._asked, f"plan-{self.name}",
                            partial(self._settle_cancels, stats), *([partial(self._poll, stats)] if full else []))
        stats.planned = True
        # Trusted for replan_seconds from the plan's end: a plan as long as the period (10,000
        # waiting beside 8 readers on two loaded cores) made every pass plan again.
        self._quiet.planned((*sig, frozenset(self._held)), time.monotonic(), idle=not plan.admit and not plan.preempt)
        return plan, free

    def _launch(self, session: Session, row, prev, settling: bool, stats: TickStats,
                compiled: dict) -> tuple[bool | None, Observation | None]:
        """The backend's submit of one admitted job, and what its answer means for the job: the
        verdict (True: it had its turn; None: the backend holds it, "later"; False: the pass stops
        here: the backend could not take it now, or failed) and the observation to write (the
        caller writes a pass's together)."""
        handle = handle_of_row(self.session_factory, row, compiled.get(row.id))
        try:
            result = self.backend.submit(handle)
        except TransientBackendError as e:
            log.warning("job %s: submit deferred: %s", row.id, e)
            if e.nothing_launched and not settling:
                self.engine.clear_launch_attempt(session, row.id, prev, fence=self.fence)
            self._note_waiting(session, row.id, f"{self.name} could not launch it yet; retrying: {e}")
            return False, None
        except PermanentBackendError as e:
            return True, Observation(row.id, state=S.FAILED, reason=f"{self.name} refused the job: {e.message}",
                                     error={**e.details, "code": e.code, "message": e.message, "source": self.name})
        except Exception:
            log.exception("job %s: submit failed", row.id)
            stats.errors += 1
            return False, None
        if result.state is None and not result.backend_ref and not result.console_url:
            if result.nothing_launched and not settling:
                self.engine.clear_launch_attempt(session, row.id, prev, fence=self.fence)
            if result.reason:
                log.info("job %s: %s", row.id, result.reason)
                self._note_waiting(session, row.id, result.reason)
            else:
                session.commit()
            return (True if settling else None), None   # settling: it had its turn (an earlier attempt still settles)
        stats.submitted += 1
        return True, Observation(row.id, state=result.state, backend_ref=result.backend_ref,
                                 console_url=result.console_url, reason=result.reason or "submitted to backend")

    def _note_waiting(self, session: Session, job_id, reason: str) -> None:
        """Commit what the pass decided for a waiting job, with why it waits (best effort)."""
        try:
            self.engine.note_waiting(session, job_id, reason, fence=self.fence)
            session.commit()
        except OperationalError:
            session.rollback()
            log.warning("job %s: could not record why it waits; next pass", job_id)

    def _apply(self, session: Session, obs: Observation, stats: TickStats, actor: str | None = None) -> None:
        """One observation, in a transaction of its own (applying.py)."""
        self._count(stats, applying.apply_one(self.engine, session, obs, fence=self.fence, actor=actor or self.name))

    def _apply_all(self, session: Session, observations: list[Observation], stats: TickStats) -> None:
        """A batch of observations in one transaction (applying.py)."""
        self._count(stats, applying.apply_all(self.engine, session, observations, fence=self.fence, actor=self.name))

    @staticmethod
    def _count(stats: TickStats, applied: applying.Applied) -> None:
        stats.changed += applied.changed
        stats.errors += applied.errors

    # -- the thread (lifecycle/services.py LoopThread) ------------------------------------------
    @property
    def label(self) -> str:
        return f"backend {self.name}"

    def wake(self, admit_only: bool = False) -> None:
        """admit_only: a job was submitted; the next pass need only admit (run_admission)."""
        if not admit_only:
            self._full_asked = True
            self._asked.ask()
        self._wake.set()

    def _pass(self) -> float:
        """A full pass every `interval` (or when asked), an admission pass when a submit woke it."""
        started = time.monotonic()
        self._full = self._full_asked or started - self._full_ended >= self.interval
        self._full_asked = False
        full = None
        try:
            if self._full:
                full = self.run_once()
            elif not self._no_room:
                self.run_admission()
            # Else skipped: at the backend's limit, a submit under load woke ~20 passes a second
            # that could launch nothing (a tenth of the API process's time, bench/README.md).
            # A freed slot is seen, and a job that preempts is planned, by the next full pass.
        finally:
            self._pass_seconds = time.monotonic() - started
            if self._full and (heard := getattr(self.planner, "heard_pass", None)):   # for the forecast (capacity/passes.py)
                heard(self.name, self._pass_seconds, time.time(), bool(getattr(full, "submitted", 0)))
        return self._next_wait()

    def _failed(self) -> float:
        if self.on_tick:
            self.on_tick(TickStats(errors=1))
        return self._next_wait()

    def _next_wait(self) -> float:
        ended = time.monotonic()
        if self._full:
            self._full_ended = ended
        return max(0.0, self._full_ended + self.interval - ended)

    def _settle(self, ended: float) -> bool:
        # Woken early (a submit, a cancel): let a burst gather into one pass. Every submit
        # wakes the loop, and a pass per submit would cost more than the submit itself. The
        # gap is at least as long as the last pass took: a pass reads the whole queue, so
        # under a stream of submits with thousands queued the passes ran back to back and
        # took ~40 % of the process's time (the GIL) from the requests (bench/README.md);
        # the passes woken early now take at most half of it. A cancel (a full pass asked) waits
        # only the wake gap: it is never held back by how long the last plan took (issue 51.3).
        gap = self.wake_gap if self._full_asked else max(self.wake_gap, self._pass_seconds)
        rest = gap_left(ended, time.monotonic(), gap)
        return rest > 0 and self._stop.wait(rest)
