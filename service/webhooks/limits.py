"""The webhook settings the outbox, the API and the dispatcher need (from TRAINJOBS_WEBHOOK_*)."""
from __future__ import annotations

from dataclasses import dataclass

from service.webhooks.destinations import Network, parse_networks


@dataclass(frozen=True)
class WebhookLimits:
    max_per_team: int = 20
    allowed_networks: tuple[Network, ...] = ()
    max_payload_bytes: int = 65_536
    request_timeout: float = 10.0
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

    @classmethod
    def from_settings(cls, s) -> WebhookLimits:
        return cls(max_per_team=s.webhook_max_per_team, allowed_networks=parse_networks(s.webhook_allowed_networks),
                   max_payload_bytes=s.webhook_max_payload_bytes, request_timeout=s.webhook_request_timeout_seconds,
                   max_attempts=s.webhook_max_attempts, retry_window=s.webhook_retry_window_seconds,
                   retry_initial=s.webhook_retry_initial_seconds,
                   retry_max_interval=s.webhook_retry_max_interval_seconds, retry_jitter=s.webhook_retry_jitter,
                   batch_size=s.webhook_delivery_batch_size, concurrency=s.webhook_delivery_concurrency,
                   interval=s.webhook_dispatch_interval_seconds, response_log_bytes=s.webhook_response_log_bytes,
                   retention_days=s.webhook_log_retention_days,
                   public_url=s.public_url.rstrip("/") if s.public_url else None)
