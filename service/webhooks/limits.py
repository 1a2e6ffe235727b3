"""The webhook settings the outbox, the API and the dispatcher need (from TRAINJOBS_WEBHOOK_*,
built by service/slices.py)."""
from __future__ import annotations

from dataclasses import dataclass

from service.webhooks.destinations import Network


@dataclass(frozen=True)
class WebhookLimits:
    max_per_team: int = 20
    allowed_networks: tuple[Network, ...] = ()
    max_payload_bytes: int = 65_536
    request_timeout: float = 10.0
    resolve_timeout: float = 2.0
    max_attempts: int = 30
    retry_window: float = 86_400.0
    retry_initial: float = 10.0
    retry_max_interval: float = 7200.0
    retry_jitter: float = 0.1
    batch_size: int = 100
    concurrency: int = 10
    interval: float = 1.0
    response_log_bytes: int = 1024
    retention_days: float = 30.0
    public_url: str | None = None

