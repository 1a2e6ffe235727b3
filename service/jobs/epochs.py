"""Per-epoch history: one row per finished epoch of a job, from the progress the
backends report (service/backends/progress.py). Replica output is
untrusted, so every value is checked before it is stored: numbers must be
finite (PostgreSQL's json type refuses NaN and Infinity), metric dicts are
cut to a bounded size, and each job keeps only its latest epochs."""
from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from service.core.text import find_unstorable
from service.lifecycle.engine import Change, Listener
from service.persistence.models import JobEpoch, utcnow

MAX_EPOCH = 2**31 - 1      # the column is a 32-bit integer on every database
MAX_METRIC_NAME = 128


@dataclass(frozen=True)
class EpochLimits:
    max_per_job: int = 1000
    max_metrics: int = 64


def _number(value: Any) -> float | int | None:
    """A finite int or float, else None (bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and abs(value) > 2**53:
        try:
            return float(value)  # JSON readers lose precision past 2**53 anyway
        except OverflowError:
            return None
    return value


def clean_metrics(raw: Any, max_metrics: int) -> dict[str, float | int | None]:
    """Numeric metrics by name; non-finite values become None (a diverged loss is a gap in
    the chart, not a lost epoch); non-numbers, odd names and the excess are dropped."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, float | int | None] = {}
    for name in sorted(k for k in raw if isinstance(k, str)):
        if len(out) >= max_metrics:
            break
        if not name or len(name) > MAX_METRIC_NAME or find_unstorable(name) is not None:
            continue
        value = raw[name]
        if isinstance(value, bool) or not (value is None or isinstance(value, (int, float))):
            continue
        out[name] = _number(value)
    return out


def _epoch_number(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EPOCH:
        return None
    return value


def _at(value: Any) -> datetime:
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is not None:
                return parsed
        except ValueError:
            pass
    return utcnow()


def _records(progress: dict) -> dict[int, dict]:
    """The epochs a progress dict speaks of: its recent ones, then its own (newest wins)."""
    found: dict[int, dict] = {}
    recent = progress.get("recent_epochs")
    items = [r for r in recent if isinstance(r, dict)] if isinstance(recent, list) else []
    own = {k: progress[k] for k in ("epoch", "steps", "seconds", "metrics") if k in progress}
    own["at"] = progress.get("updated_at")
    for record in [*items, own]:
        epoch = _epoch_number(record.get("epoch"))
        if epoch is not None:
            found[epoch] = record
    return found


def record_epoch(session: Session, job_id: uuid.UUID, progress: Any, limits: EpochLimits | None = None) -> int:
    """Upsert the epochs `progress` reports for `job_id`; returns how many rows were written.

    Called by the one writer of a job's progress, under its row lock, so a plain
    read-then-write is enough (the unique (job_id, epoch) constraint backs it). It
    runs on every progress change: plain rows and bulk statements, no ORM objects,
    and in the usual case (one new epoch) three statements."""
    if not isinstance(progress, dict):
        return 0
    records = _records(progress)
    if not records:
        return 0
    limits = limits or EpochLimits()   # the defaults of TRAINJOBS_JOB_EPOCHS_*; the listener passes the set ones
    stored = {r.epoch: (r.metrics, r.steps, r.seconds) for r in session.execute(
        select(JobEpoch.epoch, JobEpoch.metrics, JobEpoch.steps, JobEpoch.seconds)
        .where(JobEpoch.job_id == job_id, JobEpoch.epoch.in_(list(records))))}
    newest = max(records)
    new, changed = [], []
    for epoch, record in sorted(records.items()):
        if epoch in stored and epoch != newest:
            continue  # it was the newest once, and written then
        steps = _number(record.get("steps"))
        seconds = _number(record.get("seconds"))
        values = (clean_metrics(record.get("metrics"), limits.max_metrics),
                  int(steps) if steps is not None and 0 <= steps <= 2**62 else None,
                  float(seconds) if seconds is not None and seconds >= 0 else None)
        if epoch not in stored:
            new.append({"job_id": job_id, "epoch": epoch, "metrics": values[0], "steps": values[1],
                        "seconds": values[2], "at": _at(record.get("at"))})
        elif stored[epoch] != values:  # the epoch ran again (a resumed job): its latest numbers win
            changed.append((epoch, values))
    if new:
        session.execute(insert(JobEpoch), new)
    for epoch, (metrics, steps, seconds) in changed:
        session.execute(update(JobEpoch).where(JobEpoch.job_id == job_id, JobEpoch.epoch == epoch)
                        .values(metrics=metrics, steps=steps, seconds=seconds))
    if new:
        # At most max_per_job rows: the window of the latest epoch numbers.
        top = select(func.max(JobEpoch.epoch)).where(JobEpoch.job_id == job_id).scalar_subquery()
        session.execute(delete(JobEpoch).where(JobEpoch.job_id == job_id,
                                               JobEpoch.epoch <= top - limits.max_per_job)
                        .execution_options(synchronize_session=False))
    return len(new) + len(changed)


def list_epochs(session: Session, job_id: uuid.UUID, *, after: int | None = None, limit: int | None = None) -> list:
    """Rows with .epoch, .metrics, .steps, .seconds, .at, oldest first (plain rows: a job page
    reads up to max_per_job of them on every refresh)."""
    q = (select(JobEpoch.epoch, JobEpoch.metrics, JobEpoch.steps, JobEpoch.seconds, JobEpoch.at)
         .where(JobEpoch.job_id == job_id).order_by(JobEpoch.epoch))
    if after is not None:
        q = q.where(JobEpoch.epoch > after)
    if limit is not None:
        q = q.limit(limit)
    return list(session.execute(q))


def listener(limits: EpochLimits) -> Listener:
    """A lifecycle listener (service.lifecycle.engine.Engine.listen): each epoch a job's
    progress reports is kept, in the same transaction as the report, within `limits`
    (TRAINJOBS_JOB_EPOCHS_*, given by the composition root)."""
    def on_change(session: Session, change: Change) -> None:
        if change.progress:
            record_epoch(session, change.job_id, change.progress, limits)
    return on_change
