"""The sim backend's declaration (service/backends/registry.py): its name, its settings section
(SimEnv: the TRAINJOBS_SIM_* variables), the slice cut from them and its factory. Off unless TRAINJOBS_BACKENDS names `sim`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.backends.registry import BackendEntry
from service.backends.sim.settings import SimEnv, SimSettings

if TYPE_CHECKING:
    from service.lifecycle.protocol import Backend


def sim_settings_of(s: Any) -> SimSettings:
    """The slice, from the service's settings (read by attribute: this package does not import
    the global config)."""
    return SimSettings(speed=s.sim_speed, default_duration_seconds=s.sim_default_duration_seconds,
                       max_duration_seconds=s.sim_max_duration_seconds, capacity=dict(s.sim_capacity),
                       max_running_jobs=s.sim_max_running_jobs)


def _build(settings: SimSettings) -> Backend:
    from service.backends.sim.backend import SimBackend

    return SimBackend(settings)


def _runs_trainer(s: Any) -> str:
    return (f"a timer of the job's label sim-duration-seconds (default {s.sim_default_duration_seconds} s, "
            f"at speed {s.sim_speed:g}); no process starts")


ENTRY = BackendEntry(name="sim", settings=sim_settings_of, factory=_build, runs_trainer=_runs_trainer,
                     section=SimEnv)
