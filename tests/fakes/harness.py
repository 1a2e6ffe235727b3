"""Pytest fixtures for the vertex backend: the fakes of Google's APIs on
127.0.0.1 and the real app (create_app) pointed at them.

Test modules import the fixtures they use (`from tests.fakes.harness import ...`),
so they need no conftest shared with other backends' tests."""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

from service.demo import demo_template
from service.persistence.models import Job
from service.slices import Settings
from tests.fakes.cloud_logging import FakeCloudLogging
from tests.fakes.vertex_jobs import FakeJobService

PROJECT = "test-project"
LOCATION = "us-central1"


@pytest.fixture
def fake_vertex():
    with FakeJobService(PROJECT, LOCATION) as fake:
        yield fake


@pytest.fixture
def fake_logging():
    with FakeCloudLogging(PROJECT) as fake:
        yield fake


def vertex_settings(db_url: str, fake_vertex: FakeJobService, fake_logging: FakeCloudLogging, **over) -> Settings:
    # Every pass lists (tests drive passes by hand); budgets out of the way unless a test
    # sets its own; progress read when a job ends, or as often as a test asks.
    values = dict(database_url=db_url, backends=["vertex"], default_backend="vertex", run_reconciler=False,
                  seed_demo_template=False, vertex_project=PROJECT, vertex_location=LOCATION,
                  vertex_api_endpoint=fake_vertex.url, logging_api_endpoint=fake_logging.url,
                  vertex_retry_initial_seconds=0.01, vertex_retry_deadline_seconds=5.0,
                  vertex_create_timeout_seconds=10.0, vertex_poll_interval_seconds=0.0,
                  vertex_progress_interval_seconds=3600.0,
                  vertex_create_per_minute=6000.0, vertex_create_burst=1000, vertex_calls_per_minute=60000.0,
                  vertex_calls_burst=10000, logging_reads_per_minute=6000.0, logging_reads_burst=1000,
                  logs_follow_min_seconds=0.01)
    values.update(over)
    return Settings(**values)


def _auth_headers(db_url: str) -> dict[str, str]:
    from tests.conftest import bearer, make_token
    return bearer(make_token(db_url, "alpha", "admin"))


class Harness:
    """The real app over the fakes, its reconciler driven by hand."""

    def __init__(self, client: TestClient, fake: FakeJobService, logs: FakeCloudLogging):
        self.client = client
        self.fake = fake
        self.logs = logs
        self.app = client.app

    @property
    def backend(self):
        return self.app.state.services.backends["vertex"]

    def reconcile(self):
        return self.app.state.services.controller.run_once()

    def submit(self, expect: int = 201, launch: bool = True, **body) -> dict:
        """POST the job; with `launch`, one controller pass submits it (as the controller's
        loop would on its own) and the job is returned as it is after that pass."""
        body.setdefault("template", "mwms-demo")
        r = self.client.post("/v1/jobs", json=body)
        assert r.status_code == expect, r.text
        if expect != 201 or not launch:
            return r.json()
        self.reconcile()
        return self.job(r.json()["id"])

    def job(self, job_id) -> dict:
        r = self.client.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def events(self, job_id) -> list[dict]:
        r = self.client.get(f"/v1/jobs/{job_id}/events")
        assert r.status_code == 200, r.text
        return r.json()

    def use_clock(self, monkeypatch):
        """One clock (the fakes') for Google's timestamps, the lifecycle's launch stamps and
        the backend's timers and budget; tests move it on with `clock.advance(seconds)`, so
        "30 s later" needs no sleep."""
        import service.lifecycle.engine as engine_module
        import service.lifecycle.loop as loop_module

        clock = self.fake.clock
        monkeypatch.setattr(engine_module, "utcnow", clock.utcnow)
        monkeypatch.setattr(loop_module, "utcnow", clock.utcnow)
        # A retry's backoff (`not_before`) is stamped on this clock: admission reads it too.
        import service.lifecycle.admission as admission_module

        class _Datetime(datetime):
            @classmethod
            def now(cls, tz=None):
                return clock.utcnow() if tz is not None else clock.utcnow().replace(tzinfo=None)

        monkeypatch.setattr(admission_module, "datetime", _Datetime)
        backend = self.backend
        backend._now = clock.utcnow
        backend._mono = clock.monotonic
        backend.progress._clock = clock.monotonic
        for bucket in backend.budget.buckets.values():
            bucket._clock = clock.monotonic
        self.logs.clock = clock
        return clock

    def backend_handle(self, job_id):
        from service.lifecycle.handles import handle_of_job
        return handle_of_job(self.row(job_id))

    def row(self, job_id) -> Job:
        with self.app.state.services.session_factory() as s:
            return s.get(Job, uuid.UUID(str(job_id)))


@pytest.fixture
def make_harness(api_client, db_url, fake_vertex, fake_logging):
    """make_harness(**settings) -> a context manager giving a Harness (one app "process")."""
    headers = _auth_headers(db_url)
    state = {"template": False}

    @contextmanager
    def make(**over):
        settings = vertex_settings(db_url, fake_vertex, fake_logging, **over)
        with api_client(settings, headers=headers) as client:
            if not state["template"]:
                r = client.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True))
                assert r.status_code == 201, r.text
                state["template"] = True
            yield Harness(client, fake_vertex, fake_logging)

    return make


@pytest.fixture
def harness(make_harness):
    with make_harness() as h:
        yield h
