"""Settings from TRAINJOBS_* environment variables."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
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
    seed_demo_template: bool = True
    max_body_bytes: int = Field(1_048_576, description="Larger request bodies are refused with 413")
    log_format: str = Field("json", description="json (structured, one object a line) or text")
    log_level: str = "INFO"

    # Local backend
    local_work_dir: Path = Path(".trainjobs/runs")
    local_max_running_jobs: int = 2
    local_cancel_grace_seconds: float = 10.0
    local_python: str | None = Field(None, description="Python that runs `python ...` commands; default: this one")

    # Vertex backend
    vertex_project: str | None = None
    vertex_location: str = "us-central1"
    vertex_api_endpoint: str | None = Field(None, description="Default: {location}-aiplatform.googleapis.com")
    logging_api_endpoint: str | None = Field(None, description="Default: logging.googleapis.com")
    vertex_base_output_directory: str | None = None
    vertex_service_account: str | None = None


@lru_cache
def get_settings() -> Settings:
    return Settings()
