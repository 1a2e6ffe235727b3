"""The Vertex backend's settings: its TRAINJOBS_* variables (`VertexEnv`, read as part of the one
Settings, service/slices.py) and the slice it is handed (`VertexSettings`: those plus the
service-wide values it needs: the project and region, which the exports and prices read too,
and the number of API workers that share the Cloud Logging budget).

The backend is handed the slice, never the global `Settings` (well over a hundred fields, most
of them about other packages), so what the Vertex backend depends on is written down here and
nowhere else. Its entry (entry.py, which the registry calls to build it) cuts the slice from the
service's settings by field name with `VertexSettings.model_validate(settings)`."""
from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from service.core.section import Section


class VertexEnv(Section):
    """The Vertex AI backend (docs/vertex.md): where jobs run, one call to Google, following jobs,
    the Google-call budget (budget.py: token buckets per process, under Google's per-project
    quotas, leaving the rest for people and other tools), log pages and followers (log_reader.py)."""

    vertex_api_endpoint: str | None = Field(None, description="Default: {location}-aiplatform.googleapis.com")
    logging_api_endpoint: str | None = Field(None, description="Default: logging.googleapis.com")
    vertex_base_output_directory: str | None = Field(
        None, description="gs:// prefix for jobs whose template sets none; each job writes under <it>/<job id>")
    vertex_service_account: str | None = Field(None, description="Service account for jobs whose template sets none")
    vertex_request_timeout_seconds: float = Field(
        5.0, gt=0, description="One HTTP call to Vertex AI (get, list, cancel) or Cloud Logging")
    vertex_create_timeout_seconds: float = Field(
        60.0, gt=0, le=600, description="One customJobs.create call: generous, since a create can take "
                                        "several seconds and one the client gives up on may still land. "
                                        "Also sent to Google as X-Server-Timeout")
    vertex_retry_deadline_seconds: float = Field(
        10.0, gt=0, description="All retries of one log page after 5xx or timeouts, together (the controller "
                                "never retries inside a pass; a 429 pauses the budget instead)")
    vertex_retry_initial_seconds: float = Field(0.25, gt=0, description="First backoff; doubles up to 4 s")
    vertex_submit_grace_seconds: float = Field(
        180.0, ge=0, description="After a create attempt whose outcome is unknown (timeout, crash, a "
                                 "controller that lost its lock), no controller creates that job again for "
                                 "this long; it only looks it up by label (adopting a create that landed late). "
                                 "Must exceed a lookup plus a create (request + create timeout) with margin")
    vertex_max_running_jobs: int | None = Field(
        None, ge=0, description="Vertex jobs launched at once by this service; the rest wait in QUEUED, "
                                "oldest first. Default: no cap of ours (Vertex quotas still apply)")
    vertex_list_page_size: int = Field(1000, ge=1, le=1000, description="pageSize of customJobs.list (each page "
                                                                         "is one call of the Vertex budget)")
    vertex_poll_interval_seconds: float = Field(
        10.0, ge=0, le=600, description="How often the controller lists Vertex jobs to follow their states "
                                        "(its loop runs more often; cancels and creates do not wait for this)")
    vertex_progress_interval_seconds: float = Field(
        60.0, ge=0, le=3600, description="How often the progress lines of all running Vertex jobs are read "
                                         "from Cloud Logging (one query for all of them)")
    vertex_create_per_minute: float = Field(
        30.0, gt=0, le=6000, description="customJobs.create calls per minute, within the calls of "
                                         "TRAINJOBS_VERTEX_CALLS_PER_MINUTE (Vertex allows about 60 creates per "
                                         "region, shared by the project)")
    vertex_create_burst: int = Field(5, ge=1, le=1000, description="creates that may go out back to back")
    vertex_calls_per_minute: float = Field(
        120.0, gt=0, le=60000, description="Every Vertex AI call this service makes in its region, per minute: "
                                           "customJobs create, get, list and cancel, model uploads (Vertex allows "
                                           "about 600 get/list/cancel per region, shared by the whole project). "
                                           "Creates and cancels go first; following jobs slows down to fit")
    vertex_calls_burst: int = Field(10, ge=1, le=10000, description="Vertex AI calls that may go out back to back; "
                                                                    "following jobs leaves half of them for creates "
                                                                    "and cancels")
    logging_reads_per_minute: float = Field(
        30.0, gt=0, le=6000, description="Cloud Logging entries.list calls per minute by this host's API "
                                         "processes together (Google allows 60 per project, shared with "
                                         "everyone using Logs Explorer there); divided among --workers")
    logging_reads_burst: int = Field(5, ge=1, le=1000, description="entries.list calls back to back")
    google_backoff_max_seconds: float = Field(
        60.0, gt=0, le=3600, description="Longest pause of one kind of call after Google answered 429 "
                                         "(the pause doubles from 2 s with each 429 in a row)")
    logs_budget_wait_seconds: float = Field(
        2.0, ge=0, le=30, description="A GET /logs page waits this long for the Cloud Logging budget before "
                                      "answering 503 with Retry-After")
    logs_follow_min_seconds: float = Field(
        5.0, gt=0, le=600, description="Vertex log followers read Cloud Logging at most this often per job")
    logs_follow_max_seconds: float = Field(
        30.0, gt=0, le=3600, description="...and at least this often while the job is quiet")
    logs_follow_share: float = Field(
        0.5, gt=0, le=1, description="Part of the Cloud Logging budget that followed jobs may use together; "
                                     "the rest stays for pages and progress")


class VertexSettings(VertexEnv):
    # from_attributes: cut from the service's Settings object by field name; frozen: the
    # backend's threads share one instance.
    model_config = SettingsConfigDict(from_attributes=True, frozen=True)

    # The service's own (service/core/config.py), read by the exports and prices too.
    vertex_project: str | None    # TRAINJOBS_VERTEX_PROJECT
    vertex_location: str          # TRAINJOBS_VERTEX_LOCATION
    workers: int                  # TRAINJOBS_WORKERS: the API processes that divide the Cloud Logging budget
