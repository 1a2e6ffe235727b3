"""Teams, their bearer tokens and their budgets."""
from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Integer,
    String,
    Uuid,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.persistence.models.base import Base, UTCDateTime, utcnow


class Team(Base):
    """Templates, jobs and tokens belong to a team; teams never see each other's."""

    __tablename__ = "teams"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiToken(Base):
    """A bearer token. Only its SHA-256 is kept: the secret is shown once, at creation."""

    __tablename__ = "api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(String(200), default="trainjobs")
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    team: Mapped[Team] = relationship()


class TeamLimits(Base):
    """A team's budgets and quotas (service/budgets); no row: no limits. Every limit check
    of the team's submits and launches locks this row first (see budgets.locking)."""

    __tablename__ = "team_limits"

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    max_concurrent_jobs: Mapped[int | None] = mapped_column(Integer)
    max_accelerators: Mapped[dict] = mapped_column(JSON, default=dict)   # {accelerator type: count}
    max_monthly_spend_micros: Mapped[int | None] = mapped_column(BigInteger)
    on_exceed: Mapped[str] = mapped_column(String(8), default="refuse")  # refuse | queue
    checks: Mapped[int] = mapped_column(BigInteger, default=0)           # bumped by each check (the lock write)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(200), default="anonymous")
