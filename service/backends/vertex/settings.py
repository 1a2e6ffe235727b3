"""The Vertex backend's slice of the service settings: exactly the fields it reads.

The backend is handed this, never the global `Settings` (well over a hundred fields, most of
them about other packages), so what the Vertex backend depends on is written down here and
nowhere else. Field names are those of the global settings (and so the same `TRAINJOBS_*`
environment variables, whose descriptions and limits live there, in service/core/config.py):
the backend's entry (entry.py, which the registry calls to build it) maps one to the other
by name with `VertexSettings.model_validate(settings)`, and a field missing from the
global settings fails that at start-up rather than at a job's first call."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class VertexSettings(BaseModel):
    # from_attributes: built from the global Settings object by field name; frozen: the
    # backend's threads share one instance. No defaults: those (and each field's limits and
    # description) are the global settings' alone, so the two can never disagree.
    model_config = ConfigDict(from_attributes=True, frozen=True, extra="forbid")

    # Where jobs run and how they are reached (config.py checks these at start-up).
    vertex_project: str | None
    vertex_location: str
    vertex_api_endpoint: str | None
    logging_api_endpoint: str | None
    vertex_base_output_directory: str | None
    vertex_service_account: str | None
    # One call to Google, and the submit-once grace that must outlast a lookup plus a create.
    vertex_request_timeout_seconds: float
    vertex_create_timeout_seconds: float
    vertex_retry_deadline_seconds: float
    vertex_retry_initial_seconds: float
    vertex_submit_grace_seconds: float
    # Following jobs.
    vertex_max_running_jobs: int | None
    vertex_list_page_size: int
    vertex_poll_interval_seconds: float
    vertex_progress_interval_seconds: float
    # The Google-call budget (budget.py); Cloud Logging's is divided among the API workers.
    vertex_create_per_minute: float
    vertex_create_burst: int
    vertex_calls_per_minute: float
    vertex_calls_burst: int
    logging_reads_per_minute: float
    logging_reads_burst: int
    google_backoff_max_seconds: float
    workers: int
    # Log pages and followers (log_reader.py).
    logs_budget_wait_seconds: float
    logs_follow_min_seconds: float
    logs_follow_max_seconds: float
    logs_follow_share: float
