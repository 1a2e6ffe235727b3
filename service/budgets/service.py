"""Team limits: set and read them, show use against them, and check a submit.

A submit of a team in refuse mode is checked here, in the request's transaction, under the
team's limits lock (budgets.usage.lock_limits); a job that could never fit is refused in
either mode. Launches are checked by the controller (budgets.gate)."""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from decimal import Decimal
from typing import overload

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.budgets import rules
from service.budgets.schemas import LimitsIn, LimitsOut, LimitUse, UsageOut
from service.budgets.usage import (
    job_spend_to_timeout,
    lock_limits,
    month_start,
    team_use,
)
from service.core.errors import Conflict, Invalid, NotFound, Problem
from service.cost.estimate import MICRO, CostEstimate, micros
from service.persistence.models import Job, JobCost, TeamLimits, utcnow

USAGE_NOTE = ("Estimates, not a bill: spend is the accrued cost (this month) of the team's jobs that ended plus "
              "the estimate to timeout of its active jobs, at the rates each job was priced at when submitted.")


class LimitExceeded(Conflict):
    title, slug = "Team limit reached", "limit-exceeded"


def _fix(team: str) -> str:
    return (f"wait for a job of team {team} to end or cancel one; or an admin of the team raises the limit "
            f"(PUT /v1/teams/{team}/limits) or sets on_exceed to queue so jobs wait instead of being refused")


def demand_of(est: CostEstimate) -> rules.Demand:
    return rules.Demand(accelerators=dict(est.accelerators),
                        spend_micros=job_spend_to_timeout(micros(est.exact_per_hour), est.timeout_seconds),
                        complete=est.complete)


@overload
def _money(m: int) -> Decimal: ...
@overload
def _money(m: None) -> None: ...
@overload
def _money(m: int | None) -> Decimal | None: ...


def _money(m: int | None) -> Decimal | None:
    return None if m is None else (Decimal(m) * MICRO).quantize(MICRO)


def check_team(team: str, name: str) -> None:
    # Only one's own team: another team's limits are not ours to read or tell about.
    if name != team:
        raise NotFound(f"no team {name!r} among yours: your token is for team {team!r}")


def get_limits(session: Session, team_id: uuid.UUID, team: str, currency: str) -> LimitsOut:
    row = session.get(TeamLimits, team_id)
    if row is None:
        return LimitsOut(team=team, max_concurrent_jobs=None, max_accelerators={}, max_monthly_spend=None,
                         currency=currency, on_exceed="refuse", updated_at=None, updated_by=None)
    return LimitsOut(team=team, max_concurrent_jobs=row.max_concurrent_jobs, max_accelerators=row.max_accelerators,
                     max_monthly_spend=_money(row.max_monthly_spend_micros), currency=currency,
                     on_exceed=row.on_exceed, updated_at=row.updated_at, updated_by=row.updated_by)


def set_limits(session: Session, team_id: uuid.UUID, team: str, body: LimitsIn, actor: str, currency: str, *,
               max_types: int) -> LimitsOut:
    if len(body.max_accelerators) > max_types:
        raise Invalid.of([Problem("max_accelerators", f"{len(body.max_accelerators)} accelerator types; at most "
                                  f"{max_types} (TRAINJOBS_TEAM_LIMITS_MAX_ACCELERATOR_TYPES)",
                                  "name only the types the team uses")])
    values = dict(max_concurrent_jobs=body.max_concurrent_jobs, max_accelerators=dict(body.max_accelerators),
                  max_monthly_spend_micros=None if body.max_monthly_spend is None else micros(body.max_monthly_spend),
                  on_exceed=body.on_exceed, updated_at=utcnow(), updated_by=actor)
    row = lock_limits(session, team_id)
    if row is None:
        session.add(TeamLimits(team_id=team_id, checks=0, **values))
    else:
        for k, v in values.items():
            setattr(row, k, v)
    session.flush()
    return get_limits(session, team_id, team, currency)


def usage(session: Session, team_id: uuid.UUID, team: str, currency: str, now: datetime | None = None) -> UsageOut:
    now = now or utcnow()
    use = team_use(session, team_id, now, launched_only=False)
    row = session.get(TeamLimits, team_id)
    acc_caps = dict(row.max_accelerators) if row else {}
    limits = [LimitUse(limit="max_concurrent_jobs", use=Decimal(use.jobs),
                       max=None if not row or row.max_concurrent_jobs is None else Decimal(row.max_concurrent_jobs))]
    for kind in sorted(set(use.accelerators) | set(acc_caps)):
        cap = acc_caps.get(kind)
        limits.append(LimitUse(limit=f"max_accelerators.{kind}", use=Decimal(use.accelerators.get(kind, 0)),
                               max=None if cap is None else Decimal(cap)))
    limits.append(LimitUse(limit="max_monthly_spend", use=_money(use.spend_micros),
                           max=_money(row.max_monthly_spend_micros) if row else None))
    return UsageOut(team=team, at=now, month_start=month_start(now), currency=currency, jobs=use.jobs,
                    launched_jobs=use.launched, accelerators=use.accelerators, spend=_money(use.spend_micros),
                    spend_unpriced_jobs=use.unpriced, limits=limits, on_exceed=row.on_exceed if row else None,
                    note=USAGE_NOTE)


def check_submit(session: Session, team_id: uuid.UUID, team: str, est: CostEstimate) -> None:
    """Refuse a job that crosses a limit (refuse mode) or could never fit (either mode).
    Call in the transaction that inserts the job, before the insert."""
    limits = lock_limits(session, team_id)
    if limits is None:
        return
    job = demand_of(est)
    if limits.max_monthly_spend_micros is not None and not est.complete:
        raise Invalid.of([Problem("cost", f"team {team} has a monthly spend limit, and this job's estimate lacks "
                                  f"prices: {'; '.join(est.missing)}",
                                  "ask the operator for a price table with them (TRAINJOBS_PRICE_FILE), or an "
                                  f"admin of team {team} to remove the spend limit")])
    alone = rules.never_fits(limits, job, team, est.currency)
    if alone is not None:
        raise Invalid.of([Problem(f"limits.{alone.limit}", f"this job alone crosses the limit: {alone.message}",
                                  "make the job smaller (fewer replicas or accelerators, a shorter "
                                  f"scheduling.timeout_seconds), or an admin of team {team} raises the limit")])
    if limits.on_exceed == "queue":
        return
    crossed = rules.check(limits, team_use(session, team_id, utcnow(), launched_only=False), job, team,
                          est.currency)
    if crossed is not None:
        raise LimitExceeded(f"{crossed.limit}: {crossed.message}", team=team, limit=crossed.limit,
                            use=str(crossed.use), max=str(crossed.max), requested=str(crossed.needs),
                            problems=[Problem(f"limits.{crossed.limit}", crossed.message, _fix(team))])


def cost_row(job_id: uuid.UUID, team_id: uuid.UUID, est: CostEstimate) -> dict:
    """The job's job_costs row: its estimate as its team's budgets count it, written with the
    job (persistence.jobrows.insert_job; JSON as text)."""
    return dict(job_id=job_id, team_id=team_id, per_hour_micros=micros(est.exact_per_hour),
                timeout_seconds=est.timeout_seconds, complete=est.complete,
                accelerators=json.dumps(dict(est.accelerators)), currency=est.currency)


def demand_of_row(session: Session, job_id: uuid.UUID) -> tuple[uuid.UUID, rules.Demand]:
    r = session.execute(select(Job.team_id, JobCost.per_hour_micros, JobCost.timeout_seconds, JobCost.accelerators,
                               JobCost.complete).outerjoin(JobCost, JobCost.job_id == Job.id)
                        .where(Job.id == job_id)).one()
    return r.team_id, rules.Demand(accelerators=dict(r.accelerators or {}),
                                   spend_micros=job_spend_to_timeout(r.per_hour_micros or 0, r.timeout_seconds or 0),
                                   complete=bool(r.complete))
