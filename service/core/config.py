"""The service's own TRAINJOBS_* variables (the database, where `serve` listens, which backends
run, start-up and logging): the core's section of the one Settings. Every other package declares
its variables in a section of its own (service/<package>/settings.py, service/core/section.py);
the composition root (service/slices.py) joins them and reads the environment once."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from service.core.section import Section


class CoreEnv(Section):
    """The service itself: its database, where `serve` listens, the backends it runs, its start."""

    database_url: str = Field("sqlite:///./trainjobs.db",
                              description="SQLAlchemy URL; PostgreSQL as postgresql+psycopg://user@host/db")
    host: str = Field("127.0.0.1", description="The address `serve` listens on")
    port: int = Field(8000, description="The port `serve` listens on")
    backends: list[str] = Field(default_factory=lambda: ["local"],
                                description='Enabled backends, e.g. ["local","vertex"]')
    default_backend: str = Field("local", description="The backend of a job that names none, and the launch "
                                 "form's preselected one; one of TRAINJOBS_BACKENDS")
    workers: int = Field(1, ge=1, le=32, description="API worker processes of `serve` on this host")
    run_reconciler: bool = Field(True, description="false: this process serves the API only and never runs "
                                 "the jobs (never stands for controller)")
    allow_sqlite_in_container: bool = Field(
        False, description="Dockerfile.api sets TRAINJOBS_IN_CONTAINER: a SQLite file inside a container is "
                           "lost with it, so the service refuses to start on one unless this is true")
    in_container: bool = Field(False, description="Set by Dockerfile.api")
    bootstrap_token_file: Path | None = Field(
        None, description="On an empty database, write the first admin token here (mode 0600) instead of "
                          "printing it; with TRAINJOBS_BOOTSTRAP_TOKEN the token is taken from there instead")
    bootstrap_token: str | None = Field(None, description="Use this secret as the first admin token "
                                                          "(e.g. from a secret manager)")
    seed_demo_template: bool = Field(True, description="Load the mwms-demo template into team default on `serve`")
    vertex_project: str | None = Field(None, description="Google Cloud project of Vertex AI jobs; also what "
                                       "exports name (the vertex backend checks it at start)")
    vertex_location: str = Field("us-central1", description="Vertex AI region of jobs; also what exports name "
                                 "and where jobs are priced unless TRAINJOBS_COST_REGION says")
    trainer_image: str = Field(
        "trainjobs-trainer:latest", min_length=1, max_length=1024,
        description="Image of the packaged trainer (Dockerfile.trainer) that the mwms-demo template runs, "
                    "e.g. us-central1-docker.pkg.dev/PROJECT/REPO/trainer:1; Vertex AI needs it in a registry")
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token that /metrics needs for job counts (trainjobs_jobs). Without it /metrics "
                          "shows only process metrics: request counts, latencies, reconciler passes")
    log_format: Literal["auto", "json", "text"] = Field(
        "auto", description="auto: text on a terminal, JSON otherwise; json: one object a line with "
                            "request_id; text: one readable line")
    log_level: str = Field("INFO", description="Level of the service's log lines (Alembic's show only at DEBUG)")

    def database_run_folders(self) -> Path:
        """The default folder of run folders, tied to the database (default_local_work_dir)."""
        return default_local_work_dir(self.database_url)


def default_local_work_dir(database_url: str) -> Path:
    """The local backend's run folders, tied to the database (every process of one service finds
    the same). Named by a digest of the database's identity, not its name: a job sees its own
    run folder's host path (its HOME, /proc/self/mountinfo), and the database's file name, host
    or name is nothing it needs (issue 48.4). A folder of the earlier naming (`<db file>.runs`,
    `<host>-<port>-<db>/runs`) that exists is still used: an upgrade moves nothing."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        db = url.database
        if db and db != ":memory:":
            path = Path(db).expanduser().resolve()
            earlier = path.with_name(path.name + ".runs")
            return earlier if earlier.is_dir() else path.with_name(f"runs-{_digest(str(path))}")
        return Path(os.environ.get("TMPDIR", "/tmp")) / f"trainjobs-memory-{os.getpid()}" / "runs"
    # root's home is closed to the unprivileged uids replicas run as (docs/local.md).
    data = Path("/var/lib") if os.geteuid() == 0 else \
        Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    ident = f"{url.host or 'localhost'}-{url.port or 5432}-{url.database or ''}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in ident)[:100]
    if safe != ident:
        safe += "-" + hashlib.sha256(ident.encode()).hexdigest()[:8]
    earlier = data / "trainjobs" / safe / "runs"
    return earlier if earlier.is_dir() else data / "trainjobs" / _digest(ident) / "runs"


def _digest(ident: str) -> str:
    return hashlib.sha256(ident.encode()).hexdigest()[:16]
