"""A job's view reads its model upload's row only once the job SUCCEEDED: the row is made in
the transaction that records SUCCEEDED (service/model_uploads/queue.py), and the query was a
quarter of every GET /v1/jobs/{id}'s time beside thousands of log followers (bench/load.py)."""
from __future__ import annotations

import uuid

import pytest

from service.jobs import router
from service.lifecycle.states import JobState
from service.persistence.models import Job


@pytest.mark.parametrize("state,reads", [(JobState.RUNNING, False), (JobState.QUEUED, False),
                                         (JobState.FAILED, False), (JobState.SUCCEEDED, True)])
def test_the_upload_row_is_read_for_a_succeeded_job_only(monkeypatch, state, reads):
    asked = []
    monkeypatch.setattr(router.model_queue, "view",
                        lambda session, job_id, backend: asked.append(job_id) or {"state": "DONE"})
    job = Job(id=uuid.uuid4(), backend="local", state=state.value)
    resources = {"model_upload": {"to": "x"}}
    out = router._resources(job, resources, {})
    assert asked == ([job.id] if reads else [])
    assert out == ({"model_upload": {"to": "x", "state": "DONE"}} if reads else resources)
