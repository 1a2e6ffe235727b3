"""What the shared-capacity domain needs of the settings, built by service/slices.py.
No defaults here: the one Settings (service/core/config.py) holds and documents them."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CapacitySettings:
    defaults: dict[str, dict[str, int]] = field(default_factory=dict)   # TRAINJOBS_CAPACITY
    starve_after_seconds: float = 1800.0                                # TRAINJOBS_SCHEDULER_STARVE_AFTER_SECONDS
    max_preemptions_per_pass: int = 16                                  # TRAINJOBS_SCHEDULER_MAX_PREEMPTIONS_PER_PASS
    max_waiting: int = 20_000                                           # TRAINJOBS_SCHEDULER_MAX_WAITING
    grace_seconds: float = 30.0                                         # TRAINJOBS_PREEMPTION_GRACE_SECONDS
    max_preemptions_per_job: int = 3                                    # TRAINJOBS_MAX_PREEMPTIONS_PER_JOB
    queue_cache_seconds: float = 2.0                                    # TRAINJOBS_QUEUE_CACHE_SECONDS
    forecast_seconds: float = 0.3                                       # TRAINJOBS_QUEUE_FORECAST_SECONDS
    forecast_passes: int = 200                                          # TRAINJOBS_QUEUE_FORECAST_PASSES
    pass_seconds: float = 0.5                                           # TRAINJOBS_RECONCILE_INTERVAL_SECONDS
    max_priority_classes: int = 100                                     # TRAINJOBS_MAX_PRIORITY_CLASSES
    max_resources: int = 64                                             # TRAINJOBS_CAPACITY_MAX_RESOURCES
