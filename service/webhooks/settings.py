"""The webhooks domain's TRAINJOBS_* variables (docs/webhooks.md); read as part of the one Settings
(service/slices.py), which cuts them into `WebhookLimits` (limits.py)."""
from __future__ import annotations

from pydantic import Field

from service.core.section import Section


class WebhookEnv(Section):
    """Webhook deliveries (/v1/webhooks, docs/webhooks.md). Receivers are untrusted, and so is where their names point."""

    public_url: str | None = Field(None, description="This service's address as its users reach it (e.g. "
                                   "https://trainjobs.example.com); webhooks link jobs with it. Default: no "
                                   "absolute links (Slack messages then name the job without a link)")
    webhook_max_per_team: int = Field(20, ge=1, le=1000, description="Webhook subscriptions one team may have")
    webhook_allowed_networks: list[str] = Field(
        default_factory=list, description='Non-public networks webhooks may still be sent to, as CIDRs, e.g. '
        '["10.20.0.0/16"]. Addresses that are private, loopback, link-local, multicast or otherwise not '
        'public are refused at creation and at every delivery, unless listed here')
    webhook_max_payload_bytes: int = Field(65_536, ge=2048, le=1_048_576,
                                           description="A delivery's body is cut to fit this")
    webhook_request_timeout_seconds: float = Field(
        10.0, gt=0, le=120, description="The whole of one delivery attempt (name lookup, connect, send, the "
                                        "receiver's answer); longer is a failed attempt")
    webhook_max_attempts: int = Field(30, ge=1, le=100, description="Attempts per delivery, the first included")
    webhook_resolve_timeout_seconds: float = Field(
        2.0, gt=0, le=30, description="How long creating a webhook waits for its receiver's name to resolve "
                                      "(the check of its addresses); a name not resolved by then is accepted and "
                                      "checked at every delivery, as a name that does not resolve yet. A slow name "
                                      "server holds a request no longer than this")
    webhook_retry_window_seconds: float = Field(86_400.0, ge=0, le=7 * 86_400,
                                                description="A delivery is retried for this long after its event, "
                                                            "then marked failed")
    webhook_retry_initial_seconds: float = Field(10.0, gt=0, le=3600,
                                                 description="Wait before the second attempt; doubles each time")
    webhook_retry_max_interval_seconds: float = Field(7200.0, gt=0, le=86_400,
                                                      description="The longest wait between two attempts")
    webhook_retry_jitter: float = Field(0.1, ge=0, le=1, description="Each wait varies by up to this fraction, "
                                        "so a receiver back from an outage is not hit by every retry at once")
    webhook_delivery_batch_size: int = Field(100, ge=1, le=10_000, description="Deliveries read per pass")
    webhook_delivery_concurrency: int = Field(10, ge=1, le=200, description="Deliveries in flight at once, and the "
                                              "threads that look up their receivers' names (one lookup per name)")
    webhook_dispatch_interval_seconds: float = Field(
        1.0, gt=0, le=60, description="How often the controller looks for due deliveries (on PostgreSQL a "
                                      "new event also wakes it at once)")
    webhook_response_log_bytes: int = Field(1024, ge=0, le=65_536,
                                            description="Bytes of a receiver's answer kept in the delivery log")
    webhook_log_retention_days: float = Field(30.0, gt=0, le=3650, description="Finished deliveries (and their "
                                              "attempts) older than this are deleted")
