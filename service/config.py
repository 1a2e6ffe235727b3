"""Settings from TRAINJOBS_* environment variables."""
from __future__ import annotations

from functools import lru_cache
import hashlib
import os
from pathlib import Path
from typing import Literal

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
    workers: int = Field(1, ge=1, le=32, description="API worker processes of `serve` on this host")
    election_interval_seconds: float = Field(
        2.0, gt=0, le=10, description="How often a process that is not the controller tries to become it "
                                      "(one controller per database; a takeover takes about this long)")
    progress_max_bytes: int = Field(16_384, ge=1024, le=1_048_576,
                                    description="A job's stored progress (from replica output) is cut to this")
    error_max_bytes: int = Field(65_536, ge=1024, le=1_048_576,
                                 description="A job's stored error (from replicas or Google) is cut to this")
    allow_sqlite_in_container: bool = Field(
        False, description="Dockerfile.api sets TRAINJOBS_IN_CONTAINER: a SQLite file inside a container is "
                           "lost with it, so the service refuses to start on one unless this is true")
    in_container: bool = Field(False, description="Set by Dockerfile.api")
    bootstrap_token_file: Path | None = Field(
        None, description="On an empty database, write the first admin token here (mode 0600) instead of "
                          "printing it; with TRAINJOBS_BOOTSTRAP_TOKEN the token is taken from there instead")
    bootstrap_token: str | None = Field(None, description="Use this secret as the first admin token "
                                                          "(e.g. from a secret manager)")
    seed_demo_template: bool = True
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies are refused with 413 "
                                "(with Content-Length, or counted as a chunked body arrives)")
    max_problems: int = Field(50, ge=1, le=1000, description="A 4xx lists at most this many problems in `errors`; "
                              "`errors_omitted` says how many more there were")
    http_max_header_bytes: int = Field(32_768, ge=1024, le=1_048_576,
                                       description="Request line plus headers, in bytes; more answers 431")
    http_max_headers: int = Field(100, ge=8, le=10_000, description="Header fields per request; more answers 431")
    http_header_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="A request's line and headers must arrive within this long of its first "
                                        "byte (or of the connection opening); else 408 and the connection closes")
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token that /metrics needs for job counts (trainjobs_jobs). Without it /metrics "
                          "shows only process metrics: request counts, latencies, reconciler passes")
    log_format: str = Field("json", description="json (structured, one object a line) or text")
    log_level: str = "INFO"

    # Local backend
    local_work_dir: Path | None = Field(
        None, description="Run folders of local jobs. Default: tied to the database, not the working "
                          "directory: <db file>.runs/ for SQLite, "
                          "$XDG_DATA_HOME/trainjobs/<host>-<port>-<db>/runs for PostgreSQL")
    local_isolate_replicas: bool = Field(
        True, description="When the service runs as root, each local job's replicas run as an unprivileged "
                          "uid of their own (see docs/local.md)")
    local_replica_uid_base: int = Field(200_000, ge=1000, le=2**31 - 2, description="First uid for replicas")
    local_replica_uid_count: int = Field(1000, ge=1, le=100_000,
                                         description="uids for replicas: at most this many local jobs at once")
    local_sandbox: Literal["none", "bwrap"] = Field(
        "none", description="bwrap: also run each replica inside bubblewrap (apt-get install bubblewrap)")
    local_max_running_jobs: int = Field(2, ge=0, description="Local jobs running at once; the rest wait in "
                                        "QUEUED. 0 holds every local job in QUEUED.")
    local_cancel_grace_seconds: float = 10.0
    local_python: str | None = Field(None, description="Python that runs `python ...` commands; default: this one")
    local_max_replicas_per_job: int = Field(32, ge=1, description="Jobs with more replicas are refused locally")

    def resolved_local_work_dir(self) -> Path:
        return Path(self.local_work_dir) if self.local_work_dir else default_local_work_dir(self.database_url)

    # Logs API
    logs_follow_interval_seconds: float = Field(0.1, gt=0, description="How often a followed log is read")
    logs_heartbeat_seconds: float = Field(15.0, gt=0, description="SSE comment after this long without an event")

    # Vertex backend
    vertex_project: str | None = None
    vertex_location: str = "us-central1"
    vertex_api_endpoint: str | None = Field(None, description="Default: {location}-aiplatform.googleapis.com")
    logging_api_endpoint: str | None = Field(None, description="Default: logging.googleapis.com")
    vertex_base_output_directory: str | None = Field(
        None, description="gs:// prefix for jobs whose template sets none; each job writes under <it>/<job id>")
    vertex_service_account: str | None = Field(None, description="Service account for jobs whose template sets none")
    trainer_image: str = Field(
        "trainjobs-trainer:latest", min_length=1, max_length=1024,
        description="Image of the packaged trainer (Dockerfile.trainer) that the mwms-demo template runs, "
                    "e.g. us-central1-docker.pkg.dev/PROJECT/REPO/trainer:1; Vertex AI needs it in a registry")
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
    vertex_list_page_size: int = Field(500, ge=1, le=1000, description="pageSize of customJobs.list")
    vertex_poll_interval_seconds: float = Field(
        10.0, ge=0, le=600, description="How often the controller lists Vertex jobs to follow their states "
                                        "(its loop runs more often; cancels and creates do not wait for this)")
    vertex_progress_interval_seconds: float = Field(
        60.0, ge=0, le=3600, description="How often the progress lines of all running Vertex jobs are read "
                                         "from Cloud Logging (one query for all of them)")

    # Google-call budget (service/backends/vertex/budget.py): token buckets per process,
    # under Google's per-project quotas, leaving the rest for people and other tools.
    vertex_create_per_minute: float = Field(
        30.0, gt=0, le=6000, description="customJobs.create calls per minute (Vertex allows about 60 per "
                                         "region, shared by the project)")
    vertex_create_burst: int = Field(5, ge=1, le=1000, description="creates that may go out back to back")
    vertex_crud_per_minute: float = Field(
        300.0, gt=0, le=60000, description="customJobs get/list/cancel calls per minute (Vertex allows about "
                                           "600 per region, shared by the project)")
    vertex_crud_burst: int = Field(20, ge=1, le=10000, description="get/list/cancel calls back to back")
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


def default_local_work_dir(database_url: str) -> Path:
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        db = url.database
        if db and db != ":memory:":
            path = Path(db).expanduser().resolve()
            return path.with_name(path.name + ".runs")
        return Path(os.environ.get("TMPDIR", "/tmp")) / f"trainjobs-memory-{os.getpid()}" / "runs"
    # root's home is closed to the unprivileged uids replicas run as (docs/local.md).
    data = Path("/var/lib") if os.geteuid() == 0 else \
        Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    ident = f"{url.host or 'localhost'}-{url.port or 5432}-{url.database or ''}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in ident)[:100]
    if safe != ident:
        safe += "-" + hashlib.sha256(ident.encode()).hexdigest()[:8]
    return data / "trainjobs" / safe / "runs"


@lru_cache
def get_settings() -> Settings:
    return Settings()
