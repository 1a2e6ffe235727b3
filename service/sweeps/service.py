"""Sweeps: create (every trial checked, as a dry-run job, before anything is stored),
read with trials ranked by the objective, list, cancel. Raises domain errors only.
Trials are started by the controller (service.sweeps.launcher), never by a request."""
from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sqlalchemy import and_, func, select, tuple_, update
from sqlalchemy.orm import Session

from service import jobspec
from service.auth import service as auth
from service.auth.service import Actor
from service.core.errors import Conflict, DomainError, Invalid, NotFound, Problem
from service.core.pagination import decode_time_cursor, encode_cursor, id_range
from service.cost.estimate import Pricer
from service.jobs import precheck
from service.jobs.schemas import JobCreate, TemplateRef
from service.jobs.submitter import JobSubmitter
from service.lifecycle.engine import Engine
from service.lifecycle.protocol import Backend
from service.lifecycle.states import TERMINAL, JobState
from service.lifecycle.wake import notify_controller
from service.persistence.models import (
    ApiToken,
    Job,
    JobEpoch,
    Sweep,
    SweepTrial,
    utcnow,
)
from service.persistence.rows import rows_changed
from service.sweeps import space
from service.sweeps.attempts import CURRENT_JOB
from service.sweeps.schemas import (
    SWEEP_ACTIVE,
    Objective,
    SweepCreate,
    SweepOut,
    SweepState,
    SweepSummary,
    TrialOut,
)
from service.templates.cache import TemplateCache

LAUNCHER = "sweeps"      # the controller's loop service: notify_controller wakes it by this name
WAITING: Final = "WAITING"
_ACTIVE = [s.value for s in SWEEP_ACTIVE]
_TERMINAL_JOB = [s.value for s in TERMINAL]


@dataclass(frozen=True)
class SweepLimits:
    max_trials: int = 200
    max_parallel: int = 20
    max_active_per_team: int = 20



def actor_of(sweep: Sweep) -> Actor:
    """Trials are launched as the sweep's creator, with the role they had then."""
    a = sweep.actor
    return Actor(uuid.UUID(a["token_id"]), a["token_name"], sweep.team_id, a["team"], a["role"])


def job_key(sweep_id: uuid.UUID, number: int) -> str:
    """The trial job's Idempotency-Key: the job is found by it if the link was never written.
    It has spaces, which no caller's key may have (the header and the UI's form take printable
    ASCII without spaces): a teammate who sent the trial's key first would otherwise make the
    trial fail (another body: 409) or have his own job adopted as the trial."""
    return f"trainjobs sweep {sweep_id} trial {number}"


def token_live(session: Session, sweep: Sweep) -> bool:
    """The sweep creator's token is still unrevoked. A plain read is enough: the caller holds the
    sweep's row lock, and a revocation's hook (pause_sweeps_of) updates that row, so it commits
    only after a trial being started has; a revocation committed before is seen here. (Locking the
    token row too would deadlock with a revocation, which locks the token first.)"""
    return session.scalar(select(ApiToken.id).where(ApiToken.id == uuid.UUID(sweep.actor["token_id"]),
                                                    ApiToken.revoked_at.is_(None))) is not None


def pause(sweep: Sweep, reason: str) -> None:
    sweep.state, sweep.state_reason, sweep.updated_at = SweepState.PAUSED.value, reason[:500], utcnow()


def pause_sweeps_of(session: Session, token: ApiToken) -> int:
    """The revocation hook (auth.service.revoke): the token's running sweeps are PAUSED in the
    revocation's transaction, with the reason shown on each. Returns how many."""
    reason = (f"paused: token {token.name!r} ({token.id}), which created it and launches its trials, was "
              f"revoked at {token.revoked_at:%Y-%m-%d %H:%M:%S} UTC; a member may resume it (its trials then run "
              "as them) or cancel it")
    return rows_changed(session.execute(
        update(Sweep).where(Sweep.team_id == token.team_id, Sweep.state == SweepState.RUNNING.value,
                            Sweep.actor["token_id"].as_string() == str(token.id))
        .values(state=SweepState.PAUSED.value, state_reason=reason[:500], updated_at=utcnow())))


auth.ON_REVOKE.append(pause_sweeps_of)


def resume_sweep(session: Session, sweep_id: uuid.UUID, actor: Actor) -> Sweep:
    """A PAUSED sweep RUNNING again, its further trials launched as `actor` (whose token is live)."""
    sweep = get_sweep(session, actor.team_id, sweep_id, for_update=True)
    if sweep.state == SweepState.RUNNING.value:
        return sweep
    if sweep.state != SweepState.PAUSED.value:
        raise Conflict(f"sweep {sweep_id} is {sweep.state}, not PAUSED; only a paused sweep can be resumed",
                       current_state=sweep.state)
    sweep.state, sweep.state_reason, sweep.updated_at = SweepState.RUNNING.value, None, utcnow()
    sweep.actor = {"token_id": str(actor.token_id), "token_name": actor.token_name, "team": actor.team,
                   "role": actor.role}
    notify_controller(session, LAUNCHER)
    session.commit()
    return sweep


def trial_body(sweep: Sweep, number: int) -> JobCreate:
    req = sweep.request
    return JobCreate(template=sweep.template_name, template_version=sweep.template_version,
                     parameters=sweep.plan[number - 1], overrides=req.get("overrides"), backend=sweep.backend,
                     display_name=f"{sweep.display_name}-{number}", labels=req.get("labels") or {})


def create_sweep(session: Session, backends: Mapping[str, Backend], engine: Engine, body: SweepCreate, *,
                 template_cache: TemplateCache, default_backend: str, pricer: Pricer, actor: Actor,
                 limits: SweepLimits, dry_run: bool = False) -> Sweep:
    """The sweep, stored RUNNING (dry_run: checked and planned, not stored)."""
    tv = precheck.for_submit(session, template_cache, actor.team_id, body.template, body.template_version)
    if tv.archived:
        raise Conflict(f"template {body.template!r} is archived; "
                       f"POST /v1/templates/{body.template}/unarchive to use it again")
    if tv.prepared.params is None:
        raise Invalid.of(list(tv.prepared.params_problems))
    if body.max_parallel > limits.max_parallel:
        raise Invalid.of([Problem("max_parallel", f"{body.max_parallel} trials at once; a sweep may run at most "
                                  f"{limits.max_parallel}", f"ask for {limits.max_parallel} or fewer "
                                  "(the service's TRAINJOBS_SWEEP_MAX_PARALLEL)")])
    seed = body.seed
    if body.algorithm == "random" and seed is None:
        seed = random.SystemRandom().randrange(2**53)   # shown in the sweep: the trials can be drawn again
    plan = space.plan(body, list(tv.prepared.params), max_trials=limits.max_trials, seed=seed)

    sweep_id = uuid.uuid4()
    display_name = body.display_name or f"{tv.name}-sweep-{sweep_id.hex[:8]}"
    now = utcnow()
    request = body.model_dump(mode="json")
    request["parameters"] = {k: v.model_dump(mode="json", exclude_defaults=True) for k, v in body.parameters.items()}
    request["seed"] = seed
    sweep = Sweep(id=sweep_id, team_id=actor.team_id, display_name=display_name, template_id=tv.template_id,
                  template_name=tv.name, template_version=tv.version, backend=body.backend or default_backend,
                  algorithm=body.algorithm, request=request, plan=plan, trial_count=len(plan),
                  max_parallel=body.max_parallel, objective_metric=body.objective.metric,
                  objective_goal=body.objective.goal, state=SweepState.RUNNING.value,
                  actor={"token_id": str(actor.token_id), "token_name": actor.token_name, "team": actor.team,
                         "role": actor.role},
                  created_by=actor.name, created_at=now, updated_at=now)
    # Every trial as the job it will be, with every check a job gets (override policy,
    # parameter bounds, the backend's): a sweep that starts is one whose trials can all start.
    preview = JobSubmitter(backends, engine, template_cache=template_cache, pricer=pricer,
                           default_backend=default_backend)   # dry runs only: nothing stored, nobody woken
    for number in range(1, len(plan) + 1):
        try:
            preview.submit(session, trial_body(sweep, number), actor, dry_run=True,
                           trial=jobspec.Trial(sweep_id, number))
        except DomainError as e:
            values = ", ".join(f"{k}={v!r}" for k, v in plan[number - 1].items())
            e.detail = f"trial {number} ({values}) cannot run: {e.detail}"
            # The same overrides and labels go to every trial; parameters are the trial's own.
            e.problems = [p.prefixed(f"trials[{number}]") if p.field.startswith("parameters") else p
                          for p in e.problems]
            raise
    if dry_run:
        return sweep
    active = session.execute(select(func.count()).select_from(Sweep)
                             .where(Sweep.team_id == actor.team_id, Sweep.state.in_(_ACTIVE))).scalar_one()
    if active >= limits.max_active_per_team:
        raise Conflict(f"your team has {active} unfinished sweeps, the most TRAINJOBS_SWEEP_MAX_ACTIVE_PER_TEAM "
                       f"allows ({limits.max_active_per_team}); wait for one to end or cancel one")
    session.add(sweep)
    notify_controller(session, LAUNCHER)
    session.commit()
    return sweep


def get_sweep(session: Session, team_id: uuid.UUID, sweep_id: uuid.UUID, *, for_update: bool = False) -> Sweep:
    q = select(Sweep).where(Sweep.id == sweep_id, Sweep.team_id == team_id)
    if for_update:
        q = q.with_for_update()
    sweep = session.scalar(q)
    if sweep is None:
        raise NotFound(f"no sweep with id {sweep_id}")
    return sweep


def list_sweeps(session: Session, team_id: uuid.UUID, *, states: list[SweepState], limit: int,
                cursor: str | None, id_prefix: str | None = None,
                name: str | None = None) -> tuple[list[Sweep], str | None]:
    q = (select(Sweep).where(Sweep.team_id == team_id)
         .order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(limit + 1))
    if states:
        q = q.where(Sweep.state.in_([s.value for s in states]))
    if id_prefix:
        q = q.where(Sweep.id.between(*id_range(id_prefix)))
    if name is not None:
        q = q.where(Sweep.display_name == name)
    if cursor:
        q = q.where(tuple_(Sweep.created_at, Sweep.id) < decode_time_cursor(cursor))
    rows = list(session.scalars(q))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (encode_cursor(rows[-1].created_at.isoformat(), rows[-1].id) if more else None)


def cancel_trials(session: Session, engine: Engine, sweep_id: uuid.UUID, *, actor: str,
                  fence: int | None = None) -> set[str]:
    """Ask every unfinished trial job to stop (CANCELLING: the controller stops it).
    Returns the backends to wake."""
    rows = session.execute(select(Job.id, Job.backend).join(SweepTrial, CURRENT_JOB == Job.id)
                           .where(SweepTrial.sweep_id == sweep_id,
                                  Job.state.not_in(_TERMINAL_JOB + [JobState.CANCELLING.value]))).all()
    for job_id, _ in rows:
        try:
            engine.move(session, job_id, JobState.CANCELLING, reason=f"sweep {sweep_id} cancelled",
                        actor=actor, fence=fence)
        except Conflict:
            pass   # it ended on its own meanwhile
    return {backend for _, backend in rows}


def cancel_sweep(session: Session, engine: Engine, sweep_id: uuid.UUID, actor: Actor) -> Sweep:
    sweep = get_sweep(session, actor.team_id, sweep_id)
    if sweep.state == SweepState.CANCELLING.value:
        return sweep
    moved = rows_changed(session.execute(
        update(Sweep).where(Sweep.id == sweep_id, Sweep.state.in_([SweepState.RUNNING.value, SweepState.PAUSED.value]))
        .values(state=SweepState.CANCELLING.value, updated_at=utcnow())))
    if not moved:
        session.rollback()
        sweep = get_sweep(session, actor.team_id, sweep_id)
        if sweep.state == SweepState.CANCELLING.value:
            return sweep
        raise Conflict(f"sweep {sweep_id} has already ended ({sweep.state}); nothing to cancel",
                       current_state=sweep.state)
    for backend in cancel_trials(session, engine, sweep_id, actor=actor.name):
        notify_controller(session, backend)
    notify_controller(session, LAUNCHER)
    session.commit()
    session.refresh(sweep)
    return sweep


# -- reading: trials ranked by the objective -------------------------------------------------------

def _objectives(session: Session, job_ids: list[uuid.UUID], metric: str,
                goal: str) -> dict[uuid.UUID, tuple[float, int]]:
    """Per job: the best value of `metric` over its recorded epochs, and the first epoch with it."""
    if not job_ids:
        return {}
    value = JobEpoch.metrics[metric].as_float()
    best = (select(JobEpoch.job_id, (func.max(value) if goal == "maximize" else func.min(value)).label("best"))
            .where(JobEpoch.job_id.in_(job_ids)).group_by(JobEpoch.job_id).subquery())
    rows = session.execute(select(JobEpoch.job_id, best.c.best, func.min(JobEpoch.epoch))
                           .join(best, and_(best.c.job_id == JobEpoch.job_id, value == best.c.best))
                           .group_by(JobEpoch.job_id, best.c.best))
    return {job_id: (float(v), epoch) for job_id, v, epoch in rows if v is not None}


def _attempts(session: Session, first_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Each trial job's attempts (itself first)."""
    out: dict[uuid.UUID, list[uuid.UUID]] = {job_id: [job_id] for job_id in first_ids}
    if first_ids:
        for job_id, first in session.execute(select(Job.id, Job.retry_of).where(Job.retry_of.in_(first_ids))
                                             .order_by(Job.attempt)):
            if first in out:
                out[first].append(job_id)
    return out


def _best_of(values: dict[uuid.UUID, tuple[float, int]], attempts: dict[uuid.UUID, list[uuid.UUID]],
             goal: str) -> dict[uuid.UUID, tuple[float, int]]:
    """Per trial job: the best objective over its attempts (the first such attempt's epoch)."""
    sign = -1 if goal == "maximize" else 1
    out = {}
    for first, ids in attempts.items():
        found = [values[a] for a in ids if a in values]
        if found:
            out[first] = min(found, key=lambda v: sign * v[0])
    return out


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def trials_of(session: Session, sweep: Sweep) -> list[TrialOut]:
    # A trial's state and progress are its latest attempt's (sweeps/attempts.py); its objective
    # the best over every attempt it ran.
    rows = session.execute(select(SweepTrial.number, SweepTrial.parameters, SweepTrial.job_id, SweepTrial.error,
                                  SweepTrial.stopped_early, Job.state, Job.progress)
                           .outerjoin(Job, Job.id == CURRENT_JOB)
                           .where(SweepTrial.sweep_id == sweep.id).order_by(SweepTrial.number)).all()
    attempts = _attempts(session, [r.job_id for r in rows if r.job_id])
    best = _best_of(_objectives(session, [a for ids in attempts.values() for a in ids], sweep.objective_metric,
                                sweep.objective_goal), attempts, sweep.objective_goal)
    out, started = [], set()
    for r in rows:
        started.add(r.number)
        value, epoch = best.get(r.job_id, (None, None))
        metrics = (r.progress or {}).get("metrics") if isinstance(r.progress, dict) else None
        last = _number(metrics.get(sweep.objective_metric)) if isinstance(metrics, dict) else None
        state = JobState(r.state) if r.state else (JobState.FAILED if r.error else JobState.QUEUED)
        out.append(TrialOut(number=r.number, parameters=r.parameters, state=state, job_id=r.job_id,
                            objective_value=value, objective_epoch=epoch, last_value=last, error=r.error,
                            stopped_early=r.stopped_early))
    out += [TrialOut(number=n, parameters=p, state=WAITING)
            for n, p in enumerate(sweep.plan, 1) if n not in started]
    return rank(out, sweep.objective_goal)


def rank(trials: list[TrialOut], goal: str) -> list[TrialOut]:
    sign = -1 if goal == "maximize" else 1
    return sorted(trials, key=lambda t: (t.objective_value is None,
                                         sign * t.objective_value if t.objective_value is not None else 0,
                                         t.number))


def _summary_fields(sweep: Sweep, trials: list[TrialOut]) -> dict:
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state] = counts.get(t.state, 0) + 1
    best = trials[0] if trials and trials[0].objective_value is not None else None
    return dict(id=sweep.id, display_name=sweep.display_name,
                template=TemplateRef(name=sweep.template_name, version=sweep.template_version),
                backend=sweep.backend, algorithm=sweep.algorithm, state=sweep.state, state_reason=sweep.state_reason,
                objective=Objective.model_validate({"metric": sweep.objective_metric, "goal": sweep.objective_goal}),
                max_parallel=sweep.max_parallel, trial_count=sweep.trial_count, counts=counts, best=best,
                created_by=sweep.created_by, created_at=sweep.created_at, updated_at=sweep.updated_at,
                ended_at=sweep.ended_at)


def sweep_out(session: Session, sweep: Sweep) -> SweepOut:
    trials = trials_of(session, sweep)
    req = sweep.request
    search = {k: req.get(k) for k in ("parameters", "fixed_parameters", "overrides", "labels", "early_stopping")}
    return SweepOut(**_summary_fields(sweep, trials), seed=req.get("seed"), search=search, trials=trials)


def sweep_summary(session: Session, sweep: Sweep) -> SweepSummary:
    return SweepSummary(**_summary_fields(sweep, trials_of(session, sweep)))
