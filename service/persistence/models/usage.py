"""Each team's use of each backend over time (service/usage/)."""
from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Index,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.persistence.models.base import Base, UTCDateTime


class UsageBucket(Base):
    """One team's use of one backend in one clock hour, in billing units (service/usage/): each
    running job's demand weighted by TRAINJOBS_USAGE_BILLING_WEIGHTS, times the part of the hour
    it ran. Written by the controller's usage recompute only, each hour replaced whole (never
    added to), so a recompute done twice counts nothing twice."""

    __tablename__ = "usage_buckets"
    __table_args__ = (Index("ix_usage_buckets_hour", "hour"),)   # a recompute replaces and drops by hour

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    hour: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    units: Mapped[float] = mapped_column(Float)


class UsageTotal(Base):
    """A team's decayed use of one backend as of the last recompute: the sum of its buckets, each
    halved every half-life since its hour ended. Fair share reads it (decayed on to its own now).
    `closed`: the part of it from the hours before the ledger's watermark, decayed to the watermark
    (kept, so a recompute reads only the hours since the watermark, never the whole history)."""

    __tablename__ = "usage_totals"

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    units: Mapped[float] = mapped_column(Float)
    closed: Mapped[float] = mapped_column(Float, default=0.0)


class UsageLedger(Base):
    """The usage recompute's state (one row): hours before `refold_from` are folded for good; the
    half-life and weights the totals were computed with, and when."""

    __tablename__ = "usage_ledger"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    refold_from: Mapped[datetime] = mapped_column(UTCDateTime)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    half_life_seconds: Mapped[float] = mapped_column(Float)
    weights: Mapped[dict] = mapped_column(JSON, default=dict)
