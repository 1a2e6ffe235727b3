"""The local backend's declaration (service/backends/registry.py): its name, its settings
section (LocalEnv: the TRAINJOBS_LOCAL_* variables), the slice cut from them and its factory."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.backends.local.settings import LocalEnv, LocalSettings
from service.backends.registry import BackendEntry

if TYPE_CHECKING:
    from service.lifecycle.protocol import Backend


def local_settings_of(s: Any) -> LocalSettings:
    """The slice, from the service's settings (read by attribute: this package does not import
    the global config)."""
    return LocalSettings(
        work_dir=Path(s.resolved_local_work_dir()).expanduser().resolve(), python=s.local_python,
        max_running_jobs=s.local_max_running_jobs, max_replicas_per_job=s.local_max_replicas_per_job,
        cancel_grace_seconds=s.local_cancel_grace_seconds, isolate_replicas=s.local_isolate_replicas,
        sandbox=s.local_sandbox, sandbox_shared_dirs=tuple(Path(p) for p in s.local_sandbox_shared_dirs),
        replica_uid_base=s.local_replica_uid_base, replica_uid_count=s.local_replica_uid_count,
        max_processes_per_job=s.local_max_processes_per_job, sandbox_idle_seconds=s.local_sandbox_idle_seconds,
        shared_output_dir=Path(s.local_shared_output_dir).expanduser().resolve() if s.local_shared_output_dir else None)


def _build(settings: LocalSettings) -> Backend:
    from service.backends.local.backend import LocalBackend

    return LocalBackend(settings)


ENTRY = BackendEntry(name="local", settings=local_settings_of, factory=_build, section=LocalEnv)
