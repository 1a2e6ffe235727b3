"""Settings from TRAINJOBS_* environment variables."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRAINJOBS_", extra="ignore")

    database_url: str = Field("sqlite:///./trainjobs.db",
                              description="SQLAlchemy URL; PostgreSQL as postgresql+psycopg://user@host/db")
    host: str = "127.0.0.1"
    port: int = 8000
    backends: list[str] = Field(default_factory=lambda: ["local"],
                                description='Enabled backends, e.g. ["local","vertex"]')
    default_backend: str = "local"
    reconcile_interval_seconds: float = 0.5
    reconcile_batch_size: int = 500
    run_reconciler: bool = True
    workers: int = Field(1, ge=1, le=32, description="API worker processes; one of them is the controller")
    controller_lock: bool = Field(False, description="Set by `serve --workers N`: elect one controller process")
    controller_lock_path: Path = Field(Path(".trainjobs/controller.lock"),
                                       description="The lock file the workers of one service share")
    seed_demo_template: bool = True
    max_body_bytes: int = Field(1_048_576, description="Larger request bodies are refused with 413")
    log_format: str = Field("json", description="json (structured, one object a line) or text")
    log_level: str = "INFO"

    # Local backend
    local_work_dir: Path = Path(".trainjobs/runs")
    local_max_running_jobs: int = Field(2, ge=0, description="Local jobs running at once; the rest wait in "
                                        "QUEUED. 0 holds every local job in QUEUED.")
    local_cancel_grace_seconds: float = 10.0
    local_python: str | None = Field(None, description="Python that runs `python ...` commands; default: this one")
    local_max_replicas_per_job: int = Field(32, ge=1, description="Jobs with more replicas are refused locally")

    # Logs API
    logs_follow_interval_seconds: float = Field(0.1, gt=0, description="How often a followed log is read")
    logs_heartbeat_seconds: float = Field(15.0, gt=0, description="SSE comment after this long without an event")

    # Epoch history (GET /v1/jobs/{id}/epochs, the UI's charts). Replica output is untrusted.
    job_epochs_max_per_job: int = Field(1000, ge=1, le=1_000_000, description="Epochs kept per job: the "
                                        "latest this many; older rows are dropped as new ones arrive")
    job_epochs_max_metrics: int = Field(64, ge=1, le=1000, description="Metrics kept per epoch (by name); "
                                        "the rest of a larger dict is dropped")

    # Web UI (/ui)
    ui_session_secret: SecretStr | None = Field(
        None, description="Key that signs the UI's session cookies (32+ characters). Default: one "
                          "generated on first use and kept in the database, shared by every worker")
    ui_session_max_age_seconds: int = Field(43200, ge=60, le=30 * 86400,
                                            description="A UI sign-in lasts this long")
    ui_secure_cookies: bool | None = Field(None, description="Mark UI cookies Secure. Default: when the "
                                           "request came over https")
    ui_stream_interval_seconds: float = Field(1.0, gt=0, le=60, description="How often the UI's live feed "
                                              "reads the jobs changed since its last read (one query for "
                                              "every open page of this process)")
    ui_stream_max_seconds: float = Field(60.0, gt=0, le=3600, description="A UI event stream ends after "
                                         "this long and the browser reconnects where it left off (so open "
                                         "tabs never hold a stopping server for longer)")
    ui_page_size: int = Field(50, ge=1, le=200, description="Jobs per page of the UI's list")
    ui_diff_max_lines: int = Field(5000, ge=10, le=100_000, description="Template versions longer than this "
                                   "(as indented JSON) are not diffed on a page (the diff's cost grows faster "
                                   "than the length)")
    ui_log_tail_lines: int = Field(200, ge=1, le=5000, description="Log lines a job page shows before "
                                   "JavaScript follows the rest")

    # Vertex backend
    vertex_project: str | None = None
    vertex_location: str = "us-central1"
    vertex_api_endpoint: str | None = Field(None, description="Default: {location}-aiplatform.googleapis.com")
    logging_api_endpoint: str | None = Field(None, description="Default: logging.googleapis.com")
    vertex_base_output_directory: str | None = Field(
        None, description="gs:// prefix for jobs whose template sets none; each job writes under <it>/<job id>")
    vertex_service_account: str | None = Field(None, description="Service account for jobs whose template sets none")
    vertex_request_timeout_seconds: float = Field(5.0, gt=0, description="One HTTP call to Vertex AI or Cloud Logging")
    vertex_retry_deadline_seconds: float = Field(
        10.0, gt=0, description="All retries of one operation (429, 5xx, timeouts) together")
    vertex_retry_initial_seconds: float = Field(0.25, gt=0, description="First backoff; doubles up to 4 s")
    vertex_submit_grace_seconds: float = Field(
        60.0, ge=0, description="How old a QUEUED job with no CustomJob must be before the reconciler "
                                "submits it itself; longer than any submit still in flight")
    vertex_list_page_size: int = Field(500, ge=1, le=1000, description="pageSize of customJobs.list")


@lru_cache
def get_settings() -> Settings:
    return Settings()
