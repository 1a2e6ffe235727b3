"""The settings half of the composition root: the one `Settings`, every package's section joined
(each package declares the TRAINJOBS_* variables it owns in its settings.py, service/core/section.py),
read from the environment once, and cut into the slice each package is given. A package sees its
own fields, typed, and nothing else; which variable feeds which slice is said here, once. The
backends are built here too, through their registry (service/backends/registry.py), each with only
the slice its entry declares; the HTTP middleware take their few fields as keyword arguments where
service/app.py adds them."""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from service.auth.settings import AuthEnv
from service.backends import registry
from service.budgets.settings import BudgetsEnv, BudgetSettings
from service.capacity.settings import CapacityEnv, CapacitySettings
from service.capacity.whatif_settings import SimulateEnv
from service.core.config import CoreEnv
from service.cost.settings import CostEnv
from service.interop.safe_yaml import YamlLimits
from service.interop.settings import InteropEnv, InteropSettings
from service.jobs.epochs import EpochLimits
from service.jobs.settings import JobsEnv, JobSettings
from service.lifecycle.protocol import Backend
from service.lifecycle.settings import LifecycleEnv
from service.logs.batches import FanoutSettings
from service.logs.settings import LogsEnv, LogSettings
from service.model_uploads.settings import UploadEnv, UploadSettings
from service.sweeps.service import SweepLimits
from service.sweeps.settings import SweepEnv
from service.ui.settings import UiEnv, UiSettings
from service.usage.settings import UsageEnv, UsageSettings
from service.web.settings import WebEnv
from service.webhooks.destinations import parse_networks
from service.webhooks.limits import WebhookLimits
from service.webhooks.settings import WebhookEnv


class ServiceSettings(CoreEnv, LifecycleEnv, WebEnv, AuthEnv, JobsEnv, LogsEnv, UiEnv, WebhookEnv, CostEnv,
                      BudgetsEnv, CapacityEnv, SimulateEnv, UsageEnv, SweepEnv, InteropEnv, UploadEnv):
    """The service's packages' sections, joined (a package with settings adds its section here,
    docs/DESIGN.md "A new setting"); no field is declared here."""

    def resolved_cost_region(self) -> str:
        return self.cost_region or self.vertex_location


if TYPE_CHECKING:
    # What the service's own code may read: no backend's setting (each backend is handed its slice).
    Settings = ServiceSettings
else:
    class Settings(ServiceSettings, *registry.sections()):
        """Every TRAINJOBS_* variable: the packages' sections and each packaged backend's (its
        entry's `section`, found by the registry: a new backend names itself nowhere else)."""


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read from the environment once (the CLI, the app factory and
    Alembic call it; every other module is handed its slice)."""
    return Settings()


def job_settings(s: Settings) -> JobSettings:
    return JobSettings(default_backend=s.default_backend,
                       epochs=EpochLimits(s.job_epochs_max_per_job, s.job_epochs_max_metrics),
                       placement_prices=s.placement_prices,
                       placement_max_start_by_seconds=s.placement_max_start_by_seconds)


def log_settings(s: Settings) -> LogSettings:
    return LogSettings(page_max_bytes=s.logs_page_max_bytes, fanout=FanoutSettings(
        min_interval=s.logs_follow_interval_seconds, max_interval=s.logs_follow_max_interval_seconds,
        heartbeat=s.logs_heartbeat_seconds, buffer_lines=s.logs_reader_buffer_lines,
        follower_lines=s.logs_follower_buffer_lines, loop_share=s.logs_fanout_loop_share,
        buffer_bytes=s.logs_reader_buffer_bytes, follower_bytes=s.logs_follower_buffer_bytes,
        process_bytes=s.logs_buffer_bytes, line_max_bytes=s.logs_stream_line_max_bytes,
        batch_bytes=s.logs_stream_batch_bytes, max_seconds=s.logs_stream_max_seconds))


def ui_settings(s: Settings) -> UiSettings:
    return UiSettings(
        session_secret=s.ui_session_secret.get_secret_value() if s.ui_session_secret else None,
        session_max_age_seconds=s.ui_session_max_age_seconds, secure_cookies=s.ui_secure_cookies,
        stream_interval_seconds=s.ui_stream_interval_seconds, stream_max_seconds=s.ui_stream_max_seconds,
        heartbeat_seconds=s.logs_heartbeat_seconds, page_size=s.ui_page_size,
        diff_max_lines=s.ui_diff_max_lines, log_tail_lines=s.ui_log_tail_lines, default_backend=s.default_backend)


def interop_settings(s: Settings) -> InteropSettings:
    return InteropSettings(
        yaml=YamlLimits(s.import_max_bytes, s.import_max_yaml_aliases, s.import_max_yaml_nodes,
                        s.import_max_yaml_depth, s.import_max_yaml_expanded_bytes),
        vertex_location=s.vertex_location, vertex_project=s.vertex_project)


def upload_settings(s: Settings) -> UploadSettings:
    return UploadSettings(max_attempts=s.vertex_model_upload_max_attempts, per_pass=s.vertex_model_uploads_per_pass,
                          retry_seconds=s.vertex_model_upload_retry_seconds, interval=s.reconcile_interval_seconds)


def budget_settings(s: Settings) -> BudgetSettings:
    return BudgetSettings(max_accelerator_types=s.team_limits_max_accelerator_types)


def capacity_settings(s: Settings) -> CapacitySettings:
    return CapacitySettings(
        defaults={b: dict(r) for b, r in s.capacity.items()}, starve_after_seconds=s.scheduler_starve_after_seconds,
        max_preemptions_per_pass=s.scheduler_max_preemptions_per_pass, max_waiting=s.scheduler_max_waiting,
        reservations=s.scheduler_reservations,
        grace_seconds=s.preemption_grace_seconds, max_preemptions_per_job=s.max_preemptions_per_job,
        min_runtime_seconds=s.scheduler_min_runtime_seconds,
        queue_cache_seconds=s.queue_cache_seconds, queue_wait_seconds=s.queue_wait_seconds, queue_busy_share=s.queue_busy_share,
        queue_compute_timeout_seconds=s.queue_compute_timeout_seconds, queue_worker_nice=s.queue_worker_nice,
        forecast_seconds=s.queue_forecast_seconds,
        forecast_passes=s.queue_forecast_passes, pass_seconds=s.reconcile_interval_seconds,
        max_priority_classes=s.max_priority_classes, max_resources=s.capacity_max_resources)


def usage_settings(s: Settings) -> UsageSettings:
    return UsageSettings(billing_weights=dict(s.usage_billing_weights), half_life_seconds=s.usage_half_life_seconds,
                         recompute_seconds=s.usage_recompute_seconds)


def sweep_limits(s: Settings) -> SweepLimits:
    return SweepLimits(s.sweep_max_trials, s.sweep_max_parallel, s.sweep_max_active_per_team)


def webhook_limits(s: Settings) -> WebhookLimits:
    return WebhookLimits(
        max_per_team=s.webhook_max_per_team, allowed_networks=parse_networks(s.webhook_allowed_networks),
        max_payload_bytes=s.webhook_max_payload_bytes, request_timeout=s.webhook_request_timeout_seconds,
        resolve_timeout=s.webhook_resolve_timeout_seconds,
        max_attempts=s.webhook_max_attempts, retry_window=s.webhook_retry_window_seconds,
        retry_initial=s.webhook_retry_initial_seconds, retry_max_interval=s.webhook_retry_max_interval_seconds,
        retry_jitter=s.webhook_retry_jitter, batch_size=s.webhook_delivery_batch_size,
        concurrency=s.webhook_delivery_concurrency, interval=s.webhook_dispatch_interval_seconds,
        response_log_bytes=s.webhook_response_log_bytes, retention_days=s.webhook_log_retention_days,
        public_url=s.public_url.rstrip("/") if s.public_url else None)


# --- backends: each declares its slice itself (its entry.py); the registry builds the enabled ones --

def make_backends(settings: Settings) -> dict[str, Backend]:
    # Imported only when enabled: a service without Slurm or Vertex never loads their code.
    backends = registry.build(settings.backends, settings)
    if settings.default_backend not in backends:
        raise ValueError(f"TRAINJOBS_DEFAULT_BACKEND={settings.default_backend!r} is not enabled "
                         f"(TRAINJOBS_BACKENDS={settings.backends})")
    return backends


def demo_runs(settings: Settings) -> str:
    """What the demo template runs on each enabled backend, in words: the trainer image, or what
    a backend that runs no image says it runs instead (its registry entry's runs_trainer)."""
    image, other = [], []
    for name in settings.backends:
        runs = registry.entry(name).runs_trainer
        if runs is None:
            image.append(name)
        else:
            other.append(f"on {name}: {runs(settings)}")
    if not image:
        return "runs " + "; ".join(other)
    return f"runs {settings.trainer_image}" + (f" ({', '.join(image)}); {'; '.join(other)}" if other else "")
