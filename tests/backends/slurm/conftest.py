"""Fixtures that run the slurm backend against a real cluster (cluster.py): one per
test session (it starts in about a second), every job of a test cancelled after it."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from service.slices import Settings
from tests.backends.localkit import Api
from tests.backends.slurm.cluster import SlurmCluster, missing_tools
from tests.conftest import make_token

PROGRAM = Path(__file__).parent / "programs" / "task.py"
JOB_USER = "nobody"   # an unprivileged user every Debian host has: tasks never run as root


@pytest.fixture(scope="session")
def slurm_cluster():
    missing = missing_tools()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Slurm is required in CI; missing {missing} (scripts/test.sh installs it)")
        pytest.skip(f"Slurm not installed (missing {', '.join(missing)}); scripts/test.sh installs it")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd needs root")
    cluster = SlurmCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.remove()


@pytest.fixture
def cluster(slurm_cluster):
    """The session's cluster, with none of an earlier test's jobs left on it afterwards."""
    yield slurm_cluster
    slurm_cluster.cancel_all()


def slurm_settings(db_url: str, cluster: SlurmCluster, work_dir: Path, **overrides) -> Settings:
    values = dict(database_url=db_url, backends=["slurm"], default_backend="slurm", seed_demo_template=False,
                  reconcile_interval_seconds=0.2, slurm_conf=cluster.conf, slurm_work_dir=work_dir,
                  slurm_python=sys.executable, slurm_job_user=JOB_USER, slurm_cpus_per_task=1,
                  slurm_poll_interval_seconds=0.2, slurm_bin_dir=None)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def slurm_work_dir(tmp_path) -> Path:
    return tmp_path / "slurm-runs"


@pytest.fixture
def token(db_url) -> str:
    return make_token(db_url, "alpha", "admin")


@pytest.fixture
def make_slurm_client(api_client, db_url, cluster, slurm_work_dir, token):
    clients = []

    def make(**overrides) -> Api:
        client = api_client(slurm_settings(db_url, cluster, slurm_work_dir, **overrides), token)
        clients.append(client)
        return SlurmApi(client)
    yield make
    for c in reversed(clients):
        c.__exit__(None, None, None)


class SlurmApi(Api):
    def submit(self, template: str, **body) -> dict:
        r = self.c.post("/v1/jobs", json={"template": template, "backend": "slurm", **body})
        assert r.status_code == 201, r.text
        return r.json()


def spec(chief: list[str], *, workers: list[str] | None = None, worker_count: int = 1,
         timeout_seconds: int | None = None, command: list[str] | None = None, **extra) -> dict:
    out: dict = {"container": {"image_uri": "trainjobs-test:1", "command": command or ["python", str(PROGRAM)]},
                 "chief": {"container": {"args": chief}}, **extra}
    if workers is not None:
        out["workers"] = {"replica_count": worker_count, "container": {"args": workers}}
    if timeout_seconds:
        out["scheduling"] = {"timeout_seconds": timeout_seconds}
    return out
