"""The sim backend's tests' helpers: a service whose only backend is `sim` (the real app, the
real controller, SQLite or PostgreSQL), templates whose labels say how a job runs."""
from __future__ import annotations

from datetime import datetime

from service.backends.sim.runs import SimRun, parse
from service.slices import Settings
from tests.backends.localkit import Api
from tests.conftest import bearer


def settings(db_url: str, **overrides) -> Settings:
    values = dict(database_url=db_url, backends=["sim"], default_backend="sim", reconcile_interval_seconds=0.2,
                  seed_demo_template=False)
    values.update(overrides)
    return Settings(**values)


def template(api: Api, name: str, labels: dict[str, str] | None = None, workers: int = 0, **spec) -> None:
    """A template the sim runs: its image and command are never run."""
    body: dict = {"container": {"image_uri": "trainer:1", "command": ["python", "-m", "trainer.task"]}, "chief": {}}
    if workers:
        body["workers"] = {"replica_count": workers}
    if labels:
        body["labels"] = labels
    api.template(name, {**body, **spec})


def submit(api: Api, template_: str, **body) -> dict:
    r = api.c.post("/v1/jobs", json={"template": template_, **body})
    assert r.status_code == 201, r.text
    assert r.json()["backend"] == "sim"
    return r.json()


def run_of(job: dict) -> SimRun:
    run = parse(job["backend_ref"])
    assert run is not None, job["backend_ref"]
    return run


def seconds(a: str, b: str) -> float:
    """b - a, two timestamps of the job view."""
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def states(api: Api, job_id: str) -> list[str]:
    """Every state the job's events went through, in order (the first event creates it QUEUED)."""
    return [e["to_state"] for e in api.events(job_id)]


class As:
    """The same client, speaking as another token (another team's member, say)."""

    def __init__(self, client, secret: str) -> None:
        self.client, self.headers = client, bearer(secret)

    def get(self, url, **kw):
        return self.client.get(url, headers=self.headers, **kw)

    def post(self, url, **kw):
        return self.client.post(url, headers=self.headers, **kw)
