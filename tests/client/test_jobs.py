"""The sync client against a real service: submit, wait, logs, events, list,
cancel, preview, and problem+json as typed exceptions."""
from __future__ import annotations

import uuid

import pytest

from tests.backends.localkit import assert_no_processes
from tests.client.conftest import TINY_PARAMETERS, replica_spec, tiny_spec
from tests.conftest import ONE_DATABASE
from trainjobs_client import (
    Client,
    Conflict,
    Forbidden,
    InvalidRequest,
    Job,
    JobPreview,
    JobState,
    NotFound,
    Unauthorized,
    WaitTimeout,
)

pytestmark = ONE_DATABASE


def test_submit_wait_logs_events(tj, work_dir):
    tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS)
    job = tj.submit("tiny", {"epochs": 3, "tag": "007"}, labels={"team": "vision"})
    assert isinstance(job, Job) and job.template.name == "tiny" and job.parameters == {"epochs": 3, "tag": "007"}
    assert [r.task_name for r in job.cluster] == ["workerpool0-0", "workerpool1-0"]

    done = tj.wait(job, timeout=60)
    assert done.state is JobState.SUCCEEDED and done.final and done.ended_at is not None
    assert done.progress.epoch == done.progress.epochs == 3
    assert done.progress.metrics["loss"] == pytest.approx(1 / 3)

    lines = list(tj.logs(job))
    chief = [ln.message for ln in lines if ln.replica == "workerpool0-0"]
    assert chief[0] == "hello from workerpool0-0 as chief:0" and chief[-1] == "tag=007"
    assert [ln.message for ln in lines if ln.replica == "workerpool1-0"] == \
        ["hello from workerpool1-0 as worker:0"] + [f"workerpool1-0 line {i}" for i in range(3)]
    # Pages: the same lines in smaller reads, resumable from any cursor.
    assert [ln.cursor for ln in tj.logs(job, page_size=2)] == [ln.cursor for ln in lines]
    assert [ln.message for ln in tj.logs(job, since=lines[2].cursor)] == [ln.message for ln in lines[3:]]

    followed = tj.logs(job, follow=True, replica="workerpool1-0")
    assert [ln.message for ln in followed][0] == "hello from workerpool1-0 as worker:0"
    assert followed.end.state is JobState.SUCCEEDED and followed.end.error is None

    states = [(e.from_state, e.to_state) for e in tj.events(job)]
    assert states[0] == (None, JobState.QUEUED) and states[-1][1] is JobState.SUCCEEDED
    assert_no_processes(work_dir)


def test_list_iterates_every_page_newest_first_with_filters(tj):
    tj.templates.create("hold", replica_spec("--exit", "0"))
    ids = [tj.submit("hold", labels={"batch": "b1" if i % 2 else "b2"}).id for i in range(5)]
    listed = [j.id for j in tj.list(page_size=2)]
    assert listed == ids[::-1]
    assert [j.id for j in tj.list(labels={"batch": "b1"}, page_size=1)] == [ids[3], ids[1]]
    for job_id in ids:
        tj.wait(job_id, timeout=60)
    assert {j.state for j in tj.list(state=[JobState.SUCCEEDED])} == {JobState.SUCCEEDED}
    assert list(tj.list(state="FAILED")) == []


def test_preview_stores_nothing(tj):
    tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS)
    preview = tj.preview("tiny", overrides={"workers": {"replica_count": 3}})
    assert isinstance(preview, JobPreview)
    assert [r.task_name for r in preview.cluster] == ["workerpool0-0"] + [f"workerpool1-{i}" for i in range(3)]
    assert '"type": "chief"' in preview.cluster[0].env["TF_CONFIG"].replace('":"', '": "')
    assert list(tj.list()) == []


def test_cancel_and_wait_timeout(tj, tmp_path, work_dir):
    gate = tmp_path / "never"
    tj.templates.create("blocked", replica_spec("--wait-file", str(gate)))
    job = tj.submit("blocked")
    with pytest.raises(WaitTimeout) as waited:
        tj.wait(job, timeout=0.3)
    assert waited.value.job.id == job.id and not waited.value.job.final
    tj.cancel(job)
    assert tj.wait(job, timeout=60).state is JobState.CANCELLED
    with pytest.raises(Conflict) as again:
        tj.cancel(job)
    assert again.value.extra["current_state"] == "CANCELLED"
    assert_no_processes(work_dir)


def test_problems_become_typed_exceptions(tj, server, viewer_token):
    tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS)
    with pytest.raises(InvalidRequest) as bad:
        tj.submit("tiny", {"epochs": 99, "nope": 1})
    fields = {e.field: e for e in bad.value.errors}
    assert set(fields) == {"parameters.epochs", "parameters.nope"} and bad.value.status == 422
    assert fields["parameters.nope"].fix and "parameters.nope" in str(bad.value)

    with pytest.raises(NotFound) as missing:
        tj.get(uuid.uuid4())
    assert missing.value.status == 404 and "no job with id" in missing.value.detail
    with pytest.raises(NotFound):
        tj.submit("no-such-template")

    with Client(server, viewer_token) as viewer:
        with pytest.raises(Forbidden) as forbidden:
            viewer.submit("tiny")
        assert "member" in forbidden.value.detail
    with Client(server, "tj_not-a-token") as stranger:
        with pytest.raises(Unauthorized) as unauthorized:
            stranger.whoami()
    assert "the token argument" in str(unauthorized.value)
    with Client(server) as anonymous:  # no token anywhere
        with pytest.raises(Unauthorized) as anon:
            list(anonymous.list())
    assert "sent no token" in str(anon.value) and "trainjobs login" in str(anon.value)
    with pytest.raises(ValueError):
        tj.get("not-a-uuid")  # refused before any request


def test_whoami(tj):
    me = tj.whoami()
    assert (me.team, me.role) == ("alpha", "admin")


def test_relaunch_and_the_attempts_of_a_retried_job(tj, work_dir):
    spec = tiny_spec()
    spec["retry"] = {"max_attempts": 2, "exit_codes": [3], "backoff": {"initial_seconds": 0}}
    tj.templates.create("tiny", spec, TINY_PARAMETERS)
    job = tj.wait(tj.submit("tiny", {"epochs": 2}, overrides={"chief": {"container": {"args": ["--exit", "3"]}}}),
                  timeout=60)
    assert job.state is JobState.FAILED and job.attempt == 1
    second = tj.wait(tj.get(job).retried_by, timeout=60)
    assert (second.attempt, second.retry_of, second.state) == (2, job.id, JobState.FAILED)
    assert [(a.attempt, a.state) for a in second.attempts] == [(1, JobState.FAILED), (2, JobState.FAILED)]

    again = tj.relaunch(job, parameters={"epochs": 3}, overrides={"chief": {"container": None}},
                        labels={"try": "2"})
    assert again.relaunch_of == job.id and again.parameters == {"epochs": 3}
    assert tj.wait(again, timeout=60).state is JobState.SUCCEEDED
    same = tj.relaunch(job, idempotency_key="relaunch-1")
    assert tj.relaunch(job, idempotency_key="relaunch-1").id == same.id
    with pytest.raises(NotFound):
        tj.relaunch(uuid.uuid4())
    tj.wait(same, timeout=60)
    assert_no_processes(work_dir)
