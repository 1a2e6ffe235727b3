"""What the shared-capacity domain needs of the settings, built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field

from service.core.section import Section


@dataclass(frozen=True)
class CapacitySettings:
    defaults: dict[str, dict[str, int]] = field(default_factory=dict)   # TRAINJOBS_CAPACITY
    starve_after_seconds: float = 1800.0                                # TRAINJOBS_SCHEDULER_STARVE_AFTER_SECONDS
    max_preemptions_per_pass: int = 16                                  # TRAINJOBS_SCHEDULER_MAX_PREEMPTIONS_PER_PASS
    max_waiting: int = 20_000                                           # TRAINJOBS_SCHEDULER_MAX_WAITING
    reservations: int = 1                                               # TRAINJOBS_SCHEDULER_RESERVATIONS
    grace_seconds: float = 30.0                                         # TRAINJOBS_PREEMPTION_GRACE_SECONDS
    max_preemptions_per_job: int = 3                                    # TRAINJOBS_MAX_PREEMPTIONS_PER_JOB
    min_runtime_seconds: float = 600.0                                  # TRAINJOBS_SCHEDULER_MIN_RUNTIME_SECONDS
    queue_cache_seconds: float = 2.0                                    # TRAINJOBS_QUEUE_CACHE_SECONDS
    queue_wait_seconds: float = 30.0                                    # TRAINJOBS_QUEUE_WAIT_SECONDS
    queue_busy_share: float = 0.5                                       # TRAINJOBS_QUEUE_BUSY_SHARE
    queue_compute_timeout_seconds: float = 120.0                        # TRAINJOBS_QUEUE_COMPUTE_TIMEOUT_SECONDS
    queue_worker_nice: int = 10                                         # TRAINJOBS_QUEUE_WORKER_NICE
    forecast_seconds: float = 0.3                                       # TRAINJOBS_QUEUE_FORECAST_SECONDS
    forecast_passes: int = 200                                          # TRAINJOBS_QUEUE_FORECAST_PASSES
    pass_seconds: float = 0.5                                           # TRAINJOBS_RECONCILE_INTERVAL_SECONDS
    max_priority_classes: int = 100                                     # TRAINJOBS_MAX_PRIORITY_CLASSES
    max_resources: int = 64                                             # TRAINJOBS_CAPACITY_MAX_RESOURCES


class CapacityEnv(Section):
    """Shared capacity (service/capacity, service/scheduling, docs/queue.md)."""

    capacity: dict[str, dict[str, int]] = Field(
        default_factory=dict, description='What each backend may run at once, per resource, where an operator '
        'set nothing through the API (PUT /v1/capacity/{backend}), e.g. {"local": {"core": 8}, "vertex": '
        '{"gpu:NVIDIA_TESLA_A100": 16, "vcpu": 512}}; a resource no capacity names is not arbitrated')
    scheduler_starve_after_seconds: float = Field(
        1800.0, ge=0, le=30 * 86_400, description="A job waiting this long has capacity kept for it as it "
        "frees, so a large job is never starved by a stream of small ones")
    scheduler_max_preemptions_per_pass: int = Field(
        16, ge=0, le=10_000, description="Jobs one admission pass may preempt (0: no preemption)")
    scheduler_max_waiting: int = Field(
        20_000, ge=1, le=1_000_000, description="Waiting jobs of one team on one backend an admission pass "
        "looks at (each team's oldest, so one team's backlog never hides another's); the rest wait for a later pass")
    scheduler_reservations: int = Field(
        1, ge=0, le=1000, description="Jobs of one backend and admission pass that keep the capacity that frees "
        "when they do not fit (the first in the order: Slurm's backfill reservation); later jobs start only in "
        "what is not kept for them. 0: none, a job that does not fit holds back nobody (docs/queue.md, \"Backfill\")")
    preemption_grace_seconds: float = Field(
        30.0, ge=0, le=3600, description="A job trainjobs' own scheduler preempts on the local backend or Slurm: "
        "its replicas get SIGTERM, then SIGKILL after this long (the trainer saves a checkpoint in between; keep "
        "its --preemption-save-seconds, 25, below it). On Slurm the deadline is the controller's (docs/slurm.md). "
        "Not used on Vertex AI (a preemption is a cancel, Google's grace applies), nor when Slurm preempts a job "
        "itself (its GraceTime)")
    max_preemptions_per_job: int = Field(
        3, ge=0, le=1000, description="Times one job (all its attempts) may be preempted for priority; after "
        "that no class preempts it (a borrowed job stays reclaimable by a team inside its nominal quota)")
    scheduler_min_runtime_seconds: float = Field(
        600.0, ge=0, le=7 * 86_400, description="Seconds a job runs before a preemption for priority may take it "
        "(time for the trainer to reach its first checkpoint), where its priority class sets no "
        "min_runtime_seconds of its own; 0: none. A reclaim of borrowed capacity does not wait for it "
        "(docs/queue.md, \"Less work lost\")")
    queue_forecast_seconds: float = Field(
        0.3, ge=0, le=10, description="CPU seconds one queue computation may spend playing the plan forward "
        "(the predicted start order and likely starts); the jobs it does not reach keep the current pass's order")
    queue_forecast_passes: int = Field(
        200, ge=0, le=100_000, description="Scheduler passes one queue computation's forecast plays at most")
    queue_cache_seconds: float = Field(
        2.0, ge=0, le=60, description="GET /v1/queue, `trainjobs queue`, /ui/queue and a waiting job's view "
        "read one computed queue per backend and API process; a read of one older than this asks the process's "
        "queue thread for the next and is answered from it meanwhile (a computation starts no sooner than the "
        "last one's length after it ended; 0: every read waits for one begun after it); the capacity, shares and "
        "classes a submit checks are cached this long (docs/queue.md, \"Reading the queue\")")
    queue_wait_seconds: float = Field(
        30.0, gt=0, le=600, description="A read of the queue with no computed queue to show (the first after the "
        "process starts or after an operator's change, every read with TRAINJOBS_QUEUE_CACHE_SECONDS 0) waits this "
        "long at most for the computation under way, then answers 503 with Retry-After; other reads never wait "
        "(docs/queue.md, \"Reading the queue\")")
    queue_busy_share: float = Field(
        0.5, gt=0, le=1, description="The most of its time an API process spends computing queues while they are "
        "read: a computation starts no sooner than (1 / this - 1) times the last one's length after it ended (0.5: "
        "its own length; 1: at once). Lower leaves more of the process to the reads and other requests, and what "
        "the reads show is older (docs/queue.md, \"Reading the queue\")")
    queue_compute_timeout_seconds: float = Field(
        120.0, gt=0, le=3600, description="Wall time one queue computation may take in the API process's queue "
        "worker (a process of its own, started by the first read of the queue; its start included); past it the "
        "worker is killed, the readers waiting for that computation get 503 with Retry-After, the others keep the "
        "last one, and the next computation starts a new worker (docs/queue.md, \"Reading the queue\")")
    queue_worker_nice: int = Field(
        10, ge=0, le=19, description="How much the queue worker yields the CPU to the API process that started it "
        "(its nice increment): on a busy host the requests come first, the queue's computations take the CPU left "
        "(0: as much as the API process)")
    max_priority_classes: int = Field(100, ge=1, le=10_000, description="Priority classes the service may have")
    capacity_max_resources: int = Field(
        64, ge=1, le=10_000, description="Resources one backend's capacity (or one team's share) may name")
