"""The service's own rows: the controller's lease, its secrets, the operators' audit log."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Index,
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.persistence.models.base import Base, UTCDateTime, utcnow


class ControllerLease(Base):
    """One row per database: which process controls it, in which term. The epoch goes
    up at every takeover; the controller's writes carry theirs (lifecycle.engine), so a
    deposed controller's late writes change nothing."""

    __tablename__ = "controller_leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), default=0)
    holder: Mapped[str] = mapped_column(String(300), default="")
    acquired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class ServiceSecret(Base):
    """Secrets the service makes for itself (e.g. the web UI's cookie-signing key), shared by
    every worker and every host of one deployment through the database."""

    __tablename__ = "service_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditEvent(Base):
    """Who changed the service's shared settings (capacity, team shares, priority classes), when,
    and from what to what. Append-only: nothing updates or deletes a row."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_at", "at", "id"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(64))      # e.g. capacity.set, share.set, priority_class.delete
    subject: Mapped[str] = mapped_column(String(200))    # e.g. backend local, team vision on vertex
    before: Mapped[dict | None] = mapped_column(JSON)
    after: Mapped[dict | None] = mapped_column(JSON)
