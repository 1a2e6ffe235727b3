"""The sim backend's slice of the settings: exactly what it reads (TRAINJOBS_SIM_*). No defaults
here: the service's settings own them (service/core/config.py)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SimSettings:
    speed: float                      # TRAINJOBS_SIM_SPEED: a job of d seconds runs d / speed s
    default_duration_seconds: int     # TRAINJOBS_SIM_DEFAULT_DURATION_SECONDS: no sim-duration-seconds label
    max_duration_seconds: int         # TRAINJOBS_SIM_MAX_DURATION_SECONDS: a longer label is refused (422)
    capacity: dict[str, int] = field(default_factory=dict)   # TRAINJOBS_SIM_CAPACITY: offered_capacity()
    max_running_jobs: int | None = None                       # TRAINJOBS_SIM_MAX_RUNNING_JOBS

    def __post_init__(self) -> None:
        # Refused at start, not at the first job: a default the maximum refuses would fail every submit.
        if self.default_duration_seconds > self.max_duration_seconds:
            raise ValueError(f"TRAINJOBS_SIM_DEFAULT_DURATION_SECONDS={self.default_duration_seconds} is above "
                             f"TRAINJOBS_SIM_MAX_DURATION_SECONDS={self.max_duration_seconds}: lower the default "
                             "or raise the maximum")
        bad = {k: v for k, v in self.capacity.items() if v < 0 or not k}
        if bad:
            raise ValueError(f"TRAINJOBS_SIM_CAPACITY names {bad}: each resource needs a name and a count of 0 or "
                             'more, e.g. {"core": 512}')
