"""The sim backend's slice of the settings: exactly what it reads (TRAINJOBS_SIM_*), cut by its
entry from `SimEnv` below, its section of the service's one Settings (service/slices.py), which
states each variable's default, limits and meaning."""
from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field

from service.core.section import Section


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


class SimEnv(Section):
    """The simulated backend (docs/sim.md): a job is a timer, no process starts; for benchmarks and replays."""

    sim_speed: float = Field(1.0, gt=0, le=1_000_000, description="Time scale: a job of 10 s runs 10/speed s")
    sim_default_duration_seconds: int = Field(60, ge=0, description="A job without the label sim-duration-seconds")
    sim_max_duration_seconds: int = Field(30 * 86_400, ge=1, le=10 * 365 * 86_400,
                                          description="Longest sim-duration-seconds a job may name (422 past it)")
    sim_capacity: dict[str, int] = Field(default_factory=dict, description='What the sim offers (GET /v1/capacity), '
                                         'e.g. {"core": 512}; applied only as TRAINJOBS_CAPACITY or the API sets it')
    sim_max_running_jobs: int | None = Field(None, ge=0, description="Sim jobs running at once; the rest wait in "
                                             "QUEUED. Default: no cap of ours")
