"""Shared capacity: each backend's declared capacity, the teams' shares, the priority classes."""
from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.persistence.models.base import Base, UTCDateTime, utcnow


class BackendCapacity(Base):
    """What a backend may run at once, per resource ("core", "vcpu", "gpu:NVIDIA_TESLA_A100"), as
    a service operator set it through the API; a backend with no rows has its settings' default
    (service/capacity/settings.py). Set through the API, audited, read by every admission pass."""

    __tablename__ = "backend_capacity"

    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    resource: Mapped[str] = mapped_column(String(96), primary_key=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(200), default="anonymous")


class TeamShare(Base):
    """A team's share of one backend's capacity (scheduling.model.Share): nominal quota,
    borrowing and lending limits per resource ({resource: count}; a resource left out of a
    limit has none) and a fair-share weight. No row: nominal 0, borrow anything, weight 1."""

    __tablename__ = "team_shares"

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    nominal: Mapped[dict] = mapped_column(JSON, default=dict)
    borrowing_limit: Mapped[dict] = mapped_column(JSON, default=dict)
    lending_limit: Mapped[dict] = mapped_column(JSON, default=dict)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(200), default="anonymous")


class PriorityClass(Base):
    """A priority class an operator defined: its value (higher goes first within a team),
    whether its jobs may preempt lower-priority ones, and which teams may use it (null: all)."""

    __tablename__ = "priority_classes"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    value: Mapped[int] = mapped_column(Integer)
    preempts: Mapped[bool] = mapped_column(Boolean, default=False)
    teams: Mapped[list | None] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(String(500), default="")
    # How long its jobs run before a preemption for priority may take them (null: the setting's,
    # TRAINJOBS_SCHEDULER_MIN_RUNTIME_SECONDS).
    min_runtime_seconds: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(200), default="anonymous")
