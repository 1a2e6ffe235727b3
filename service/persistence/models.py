"""ORM tables. The schema is made by Alembic migrations only (migrations/)."""
from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Re-exported: domain modules stamp rows with the same clock as the column defaults.
from service.core.clock import utcnow as utcnow


class UTCDateTime(TypeDecorator):
    """Timezone-aware everywhere: SQLite keeps no zone, so store UTC and re-attach it."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime; use an aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


# Constraint names the same on every database, so migrations can refer to them.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


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


class Template(Base):
    __tablename__ = "templates"
    __table_args__ = (UniqueConstraint("team_id", "name", name="uq_templates_team_name"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id"))
    name: Mapped[str] = mapped_column(String(63))
    latest_version: Mapped[int] = mapped_column(Integer)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    versions: Mapped[list[TemplateVersion]] = relationship(back_populates="template",
                                                            order_by="TemplateVersion.version")


class TemplateVersion(Base):
    """Immutable: an update writes a new version, and jobs point at the one they used."""

    __tablename__ = "template_versions"
    __table_args__ = (UniqueConstraint("template_id", "version", name="uq_template_versions_template_version"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    template_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("templates.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text, default="")
    spec: Mapped[dict] = mapped_column(JSON)
    parameters: Mapped[list] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(String(200), default="anonymous")

    template: Mapped[Template] = relationship(back_populates="versions")


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

    events: Mapped[list[JobEvent]] = relationship(order_by="JobEvent.id", viewonly=True)


class JobLabel(Base):
    """Labels again as rows, so `label=team:vision` filters use an index on any database."""

    __tablename__ = "job_labels"
    __table_args__ = (Index("ix_job_labels_key_value", "key", "value", "job_id"),)

    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(64))


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


class ControllerLease(Base):
    """One row per database: which process controls it, in which term. The epoch goes
    up at every takeover; the controller's writes carry theirs (lifecycle.engine), so a
    deposed controller's late writes change nothing."""

    __tablename__ = "controller_leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), default=0)
    holder: Mapped[str] = mapped_column(String(300), default="")
    acquired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


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


class ServiceSecret(Base):
    """Secrets the service makes for itself (e.g. the web UI's cookie-signing key), shared by
    every worker and every host of one deployment through the database."""

    __tablename__ = "service_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookSubscription(Base):
    """A team's webhook: where its job events go, signed with `secret` (Standard Webhooks).
    The secret is kept as is: every delivery is signed with it."""

    __tablename__ = "webhook_subscriptions"
    __table_args__ = (Index("ix_webhook_subscriptions_team_created", "team_id", "created_at", "id"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    event_types: Mapped[list] = mapped_column(JSON)
    format: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(String(200), default="")
    secret: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(String(200), default="anonymous")
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class WebhookDelivery(Base):
    """One event for one subscription: the outbox row (written in the transaction of the job
    change) and its entry in the delivery log. A redelivery is a new row with the same
    message_id (the `webhook-id` receivers deduplicate by)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_status_next", "status", "next_attempt_at"),  # the dispatcher's scan
        Index("ix_webhook_deliveries_subscription_created", "subscription_id", "created_at", "id"),  # the log
        Index("ix_webhook_deliveries_created", "created_at"),  # retention
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    subscription_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"))
    message_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    payload: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))     # pending, delivered, failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    redelivery_of: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookAttempt(Base):
    """One HTTP request of a delivery: what the receiver answered, or why there was no answer."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_delivery", "delivery_id", "number"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
                                    autoincrement=True)
    delivery_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhook_deliveries.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    response_body: Mapped[str] = mapped_column(Text, default="")
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)


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
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(200), default="anonymous")


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


class UsageBucket(Base):
    """One team's use of one backend in one clock hour, in billing units (service/usage/): each
    running job's demand weighted by TRAINJOBS_USAGE_BILLING_WEIGHTS, times the part of the hour
    it ran. Written by the controller's usage recompute only, each hour replaced whole (never
    added to), so a recompute done twice counts nothing twice."""

    __tablename__ = "usage_buckets"

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    hour: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    units: Mapped[float] = mapped_column(Float)


class UsageTotal(Base):
    """A team's decayed use of one backend as of the last recompute: the sum of its buckets, each
    halved every half-life since its hour ended. Fair share reads it (decayed on to its own now)."""

    __tablename__ = "usage_totals"

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    backend: Mapped[str] = mapped_column(String(32), primary_key=True)
    units: Mapped[float] = mapped_column(Float)


class UsageLedger(Base):
    """The usage recompute's state (one row): hours before `refold_from` are folded for good; the
    half-life and weights the totals were computed with, and when."""

    __tablename__ = "usage_ledger"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    refold_from: Mapped[datetime] = mapped_column(UTCDateTime)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    half_life_seconds: Mapped[float] = mapped_column(Float)
    weights: Mapped[dict] = mapped_column(JSON, default=dict)
