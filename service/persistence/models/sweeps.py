"""Sweeps and their trials."""
from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    Uuid,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.persistence.models.base import Base, UTCDateTime, utcnow


class Sweep(Base):
    """A hyperparameter sweep: one template, a planned list of trials (parameter sets), and
    the controller's progress through them (service.sweeps). Each launched trial is a job."""

    __tablename__ = "sweeps"
    __table_args__ = (
        Index("ix_sweeps_team_created", "team_id", "created_at", "id"),   # the list, newest first
        Index("ix_sweeps_state_checked", "state", "checked_at"),          # the controller's scan
        Index("ix_sweeps_team_name_created", "team_id", "display_name", "created_at", "id"),  # CLI: by name
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id"))
    display_name: Mapped[str] = mapped_column(String(128))
    template_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("templates.id"))
    template_name: Mapped[str] = mapped_column(String(63))
    template_version: Mapped[int] = mapped_column(Integer)
    backend: Mapped[str] = mapped_column(String(32))
    algorithm: Mapped[str] = mapped_column(String(16))
    request: Mapped[dict] = mapped_column(JSON)         # the search as sent (space, fixed, overrides, labels...)
    plan: Mapped[list] = mapped_column(JSON)            # each trial's parameters, trial 1 first
    trial_count: Mapped[int] = mapped_column(Integer)
    max_parallel: Mapped[int] = mapped_column(Integer)
    objective_metric: Mapped[str] = mapped_column(String(128))
    objective_goal: Mapped[str] = mapped_column(String(8))
    state: Mapped[str] = mapped_column(String(16))
    state_reason: Mapped[str | None] = mapped_column(String(500))   # why it is PAUSED
    actor: Mapped[dict] = mapped_column(JSON)           # who created it: trials are launched as them
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class SweepTrial(Base):
    """A trial the controller has started: the (sweep, number) key makes starting it twice
    impossible. `job_id` is null only between the job's commit and the link's, or when
    the job could not be created (then `error` says why)."""

    __tablename__ = "sweep_trials"

    sweep_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("jobs.id"), unique=True)
    parameters: Mapped[dict] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    stopped_early: Mapped[str | None] = mapped_column(Text)    # why early stopping cancelled it
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
