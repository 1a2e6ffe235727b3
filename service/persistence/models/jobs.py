"""A job and its per-job tables (persistence.jobrows.PER_JOB writes a new job's), its epochs and model uploads."""
from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.persistence.models.base import Base, UTCDateTime, utcnow


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        # Keyset pagination within a team: newest first, id breaks ties; one index per common filter.
        Index("ix_jobs_team_created", "team_id", "created_at", "id"),
        Index("ix_jobs_team_state_created", "team_id", "state", "created_at", "id"),
        Index("ix_jobs_team_template_created", "team_id", "template_name", "created_at", "id"),
        Index("ix_jobs_team_name_created", "team_id", "display_name", "created_at", "id"),  # CLI: by name
        # The reconciler's scan of active jobs, across teams.
        Index("ix_jobs_backend_state_created", "backend", "state", "created_at", "id"),
        # The controller's launched jobs (lifecycle.admission.launched_active), read on every
        # pass: with 10,000 jobs QUEUED the index above made it visit each of them (a QUEUED job
        # is launched only once it has a backend_ref), 5 ms of the database per query.
        Index("ix_jobs_backend_launched", "backend", "state", "created_at", "id",
              postgresql_where=text("backend_ref IS NOT NULL"), sqlite_where=text("backend_ref IS NOT NULL")),
        # Each team's last launch on a backend (capacity/snapshot.served_of): one seek per team a pass.
        Index("ix_jobs_backend_team_launch", "backend", "team_id", "launch_attempted_at"),
        # The web UI's live feed: one scan of recently changed jobs per interval.
        Index("ix_jobs_updated_at", "updated_at"),
        # Idempotency-Key: one job per key per team (NULLs never collide).
        UniqueConstraint("team_id", "idempotency_key", name="uq_jobs_team_idempotency_key"),
        # Team budgets: this month's ended jobs (service/budgets).
        Index("ix_jobs_team_ended", "team_id", "ended_at"),
        # One row per attempt of a job: two controllers can never both add attempt N (and the
        # attempts of a job are found by this index).
        UniqueConstraint("retry_of", "attempt", name="uq_jobs_retry_of_attempt"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id"))
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    display_name: Mapped[str] = mapped_column(String(128))
    template_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("templates.id"))
    template_name: Mapped[str] = mapped_column(String(63))
    template_version: Mapped[int] = mapped_column(Integer)
    backend: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(32))
    parameters: Mapped[dict] = mapped_column(JSON)
    overrides: Mapped[dict] = mapped_column(JSON)
    labels: Mapped[dict] = mapped_column(JSON)
    compiled: Mapped[dict] = mapped_column(JSON)
    backend_ref: Mapped[str | None] = mapped_column(String(512))
    console_url: Mapped[str | None] = mapped_column(String(1024))
    error: Mapped[dict | None] = mapped_column(JSON)
    progress: Mapped[dict | None] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(200), default="anonymous")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Set (and committed) before every submit attempt: see lifecycle.engine.mark_launch_attempt.
    launch_attempted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Why a QUEUED job has not been launched yet, as its backend last said (e.g. waiting for
    # the Vertex create budget); cleared when it leaves QUEUED. See lifecycle.engine.note_waiting.
    waiting_reason: Mapped[str | None] = mapped_column(String(500))
    # When the backend last confirmed `state` (a Vertex listing that showed it): with many jobs
    # on a small call budget, tens of seconds ago. See lifecycle.observed; not a change of the job.
    state_observed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Retries (service.lifecycle.retries): each attempt is a job; attempts after the first
    # point at the first one. A QUEUED attempt is not launched before `not_before` (its backoff).
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    retry_of: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("jobs.id"))
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # POST /v1/jobs/{id}/relaunch: the job this one was launched again from.
    relaunch_of: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("jobs.id"))
    # Shared capacity (service/capacity, service/scheduling): what the job holds while it runs, in
    # its backend's resource names ({"core": 2}, {"vcpu": 8, "gpu:NVIDIA_TESLA_T4": 2}), computed
    # once at submit so that an admission pass never parses a CustomJob; its priority class as
    # submitted (name, value and whether it may preempt, copied: a later change of the class does
    # not move jobs already queued).
    demand: Mapped[dict | None] = mapped_column(JSON)
    priority_class: Mapped[str | None] = mapped_column(String(63))
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    may_preempt: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    # How often this job's attempts were preempted so far (carried to the next attempt): bounded
    # by TRAINJOBS_MAX_PREEMPTIONS_PER_JOB, after which it is no longer preempted.
    preemptions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # A preemption under way (set by the controller, fenced): when it was asked, for which waiting
    # job, and why in words. The job keeps its state until its backend reports it stopped.
    preempt_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    preempted_for: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    preempt_reason: Mapped[str | None] = mapped_column(String(500))
    preempt_kind: Mapped[str | None] = mapped_column(String(20))     # reclaim | priority (scheduling.PreemptionKind)
    # Set on a waiting job the controller preempted others for: it goes first until it starts.
    nominated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Placement across backends (docs/queue.md): the backends the job accepts, most preferred
    # first, each with its demand there ([{"backend": "slurm", "demand": {...}}, ...]); None: only
    # `backend`. Until a launch attempt claims one (the fenced, guarded write of
    # lifecycle.engine.mark_launch_attempt), `backend` is the most preferred; the claim sets it
    # (and `demand`) to the chosen one, and `placement` says why there.
    accepts: Mapped[list | None] = mapped_column(JSON)
    placement: Mapped[str | None] = mapped_column(String(500))
    # Its placement wish among them (docs/queue.md, "Cheapest or soonest"), resolved at submit:
    # {"prefer": "cheapest", "start_by": <epoch seconds or null>, "prices": {backend: per hour or null}};
    # None: the listed order, no deadline.
    wish: Mapped[dict | None] = mapped_column(JSON)

    events: Mapped[list[JobEvent]] = relationship(order_by="JobEvent.id", viewonly=True)


class JobLabel(Base):
    """Labels again as rows, so `label=team:vision` filters use an index on any database."""

    __tablename__ = "job_labels"
    __table_args__ = (Index("ix_job_labels_key_value", "key", "value", "job_id"),)

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(64))


class JobBackend(Base):
    """A backend a job accepts (one row each, for a job that accepts more than one: Job.accepts):
    each backend's admission reads the jobs waiting for it through ix_job_backends_backend."""

    __tablename__ = "job_backends"
    __table_args__ = (Index("ix_job_backends_backend", "backend", "job_id"),)

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer)           # 0: the most preferred
    demand: Mapped[dict | None] = mapped_column(JSON)    # what the job holds there


class JobEvent(Base):
    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job", "job_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
                                    autoincrement=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(200), default="system")
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobCost(Base):
    """What a job was estimated to cost when it was submitted, and what it holds while it
    runs: the team budgets add these up without reading every job's CustomJob."""

    __tablename__ = "job_costs"
    __table_args__ = (Index("ix_job_costs_team", "team_id", "job_id"),)

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    per_hour_micros: Mapped[int] = mapped_column(BigInteger)
    timeout_seconds: Mapped[int] = mapped_column(Integer)
    complete: Mapped[bool] = mapped_column(Boolean)
    accelerators: Mapped[dict] = mapped_column(JSON)   # {accelerator type: count, all pools}
    currency: Mapped[str] = mapped_column(String(3))


class JobEpoch(Base):
    """One finished epoch of a job: the chief's metrics, kept for the charts (bounded per job)."""

    __tablename__ = "job_epochs"
    __table_args__ = (UniqueConstraint("job_id", "epoch", name="uq_job_epochs_job_epoch"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
                                    autoincrement=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict] = mapped_column(JSON)
    steps: Mapped[int | None] = mapped_column(BigInteger)
    seconds: Mapped[float | None] = mapped_column(Float)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelUpload(Base):
    """A Vertex job's model upload after it SUCCEEDED (template `model_upload`; issue 26):
    one row per job, made in the transaction that records SUCCEEDED, worked through by the
    controller (service/model_uploads/uploads.py). `attempts` counts uploads tried:
    after the first, the Model Registry is looked up by the job-id label before any other."""

    __tablename__ = "model_uploads"
    __table_args__ = (Index("ix_model_uploads_due", "state", "next_at"),)

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))          # pending | uploading | succeeded | failed
    model: Mapped[str | None] = mapped_column(String(512))  # projects/P/locations/L/models/ID, once known
    message: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
