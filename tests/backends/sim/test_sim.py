"""Issue 51.1: the simulated backend runs jobs through the real lifecycle (the real app, the
controller, the store and the events, on SQLite and PostgreSQL): a job is a timer of the length
its label names, ends as its label says, is cancelled, fails and is retried, answers bad labels
with a 422, and is followed by a restarted service from its row alone."""
from __future__ import annotations

import re
import time

import pytest

from tests.apikit import assert_problem
from tests.backends.localkit import Api
from tests.backends.sim.simkit import run_of, seconds, settings, states, submit, template
from tests.waiting import wait_for


@pytest.fixture
def start(api_client, db_url, token):
    return lambda **overrides: api_client(settings(db_url, **overrides), token)


def test_a_job_runs_its_duration_then_succeeds_with_its_logs(start):
    api = Api(start(sim_speed=10.0))
    template(api, "timer", {"sim-duration-seconds": "10"}, workers=2)   # 10 s at speed 10: 1 s
    job = submit(api, "timer")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED", "CANCELLED")
    assert done["state"] == "SUCCEEDED", done["error"]
    assert states(api, job["id"]) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]
    run = run_of(done)
    assert (run.run_ms, run.exit_code, run.stop_ms) == (1000, 0, None)
    assert seconds(done["started_at"], done["ended_at"]) == 1.0      # its timer, not the poll's
    assert done["resources"]["sim"].startswith("a timer of 10 s at speed 10, then the chief exits with status 0")

    lines = api.all_logs(job["id"])
    tasks = ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    assert sorted({line["replica"] for line in lines}) == tasks and len(lines) == 9
    chief = [line["message"] for line in lines if line["replica"] == tasks[0]]
    assert chief == ["sim: workerpool0-0 started; runs 1 s, then the chief exits with status 0",
                     "sim: workerpool0-0 halfway (0.5 s)", "sim: workerpool0-0 exited with status 0"]
    assert [line["timestamp"] for line in lines] == sorted(line["timestamp"] for line in lines)
    first = api.logs(job["id"], limit=4)       # a cursor goes on where the page stopped
    assert len(first["lines"]) == 4 and api.all_logs(job["id"], since=first["cursor"]) == lines[4:]
    assert [line["message"] for line in api.all_logs(job["id"], replica="workerpool1-1")] == \
        [line["message"] for line in lines if line["replica"] == "workerpool1-1"]
    assert_problem(api.c.get(f"/v1/jobs/{job['id']}/logs", params={"replica": "workerpool9-0"}), 422, "replica")

    # The duration may come with the submit instead of the template.
    quick = submit(api, "timer", labels={"sim-duration-seconds": "0"})
    assert run_of(api.wait_state(quick["id"], "SUCCEEDED")).run_ms == 0


def test_a_job_that_asks_to_fail_fails_with_its_exit_code_and_is_retried(start):
    api = Api(start())
    template(api, "failing", {"sim-duration-seconds": "0", "sim-exit-code": "3"}, workers=1,
             retry={"max_attempts": 2, "exit_codes": [3], "backoff": {"initial_seconds": 0}})
    job = submit(api, "failing")
    failed = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert failed["state"] == "FAILED"
    assert (failed["error"]["exit_code"], failed["error"]["replica"]) == (3, "workerpool0-0")
    assert states(api, job["id"]) == ["QUEUED", "PENDING", "RUNNING", "FAILED"]
    second = wait_for(lambda: api.job(job["id"]).get("retried_by"), "the retry policy's second attempt")
    assert api.wait_state(second, "FAILED", "SUCCEEDED")["error"]["exit_code"] == 3
    assert [line["message"] for line in api.all_logs(job["id"])][-2:] == [
        "sim: workerpool0-0 exited with status 3", "sim: workerpool1-0 stopped: the chief exited with status 3"]


def test_bad_sim_labels_are_refused_at_submit_with_what_to_fix(start):
    api = Api(start(sim_max_duration_seconds=100))
    template(api, "timer")
    r = api.c.post("/v1/jobs", json={"template": "timer", "labels": {
        "sim-duration-seconds": "101", "sim-exit-code": "256", "sim-demand-core": "many", "sim-duraton": "5"}})
    body = assert_problem(r, 422)
    problems = {e["field"]: e for e in body["errors"]}
    assert set(problems) == {"labels.sim-demand-core", "labels.sim-duraton", "labels.sim-duration-seconds",
                             "labels.sim-exit-code"}
    assert "from 0 to 100 (TRAINJOBS_SIM_MAX_DURATION_SECONDS)" in problems["labels.sim-duration-seconds"]["fix"]
    assert "sim-duration-seconds" in problems["labels.sim-duraton"]["fix"]
    for value in ("-1", "1_0", "٣"):   # allowed label characters, not a duration
        r = api.c.post("/v1/jobs", json={"template": "timer", "labels": {"sim-duration-seconds": value}})
        assert_problem(r, 422, "labels.sim-duration-seconds")
    assert api.c.get("/v1/jobs").json()["items"] == []    # nothing stored


def test_cancel_stops_the_timer_at_once(start):
    api = Api(start())
    template(api, "long", {"sim-duration-seconds": "3600"})
    job = submit(api, "long")
    api.wait_state(job["id"], "RUNNING")
    assert api.c.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
    done = api.wait_state(job["id"], "CANCELLED", "FAILED", "SUCCEEDED")
    assert done["state"] == "CANCELLED"
    assert states(api, job["id"]) == ["QUEUED", "PENDING", "RUNNING", "CANCELLING", "CANCELLED"]
    run = run_of(done)
    assert run.stopped_by == "cancelled" and run.stopped and seconds(done["started_at"], done["ended_at"]) < 60
    messages = [line["message"] for line in api.all_logs(job["id"])]
    assert messages[0].startswith("sim: workerpool0-0 started; runs 3600 s")
    assert messages[-1] == "sim: workerpool0-0 stopped at once (cancelled)" and len(messages) == 2


def test_a_restarted_service_follows_the_running_job_from_its_row(start):
    first = start()
    api = Api(first)
    template(api, "waiter", {"sim-duration-seconds": "8"})   # longer than a stop takes on a loaded host
    job = submit(api, "waiter")
    running = api.wait_state(job["id"], "RUNNING")
    first.__exit__(None, None, None)   # the service stops: its controller's memory is gone
    end_ms = run_of(running).end_ms
    assert time.time() * 1000 < end_ms, "the service took longer to stop than the job to run: inconclusive"

    # Another speed now: a job launched before keeps the time it was launched with.
    api = Api(start(sim_speed=1000.0))
    assert api.job(job["id"])["state"] == "RUNNING"
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED", "CANCELLED")
    assert time.time() * 1000 >= end_ms and done["state"] == "SUCCEEDED"
    assert seconds(done["started_at"], done["ended_at"]) == 8.0
    assert states(api, job["id"]) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]


def test_the_default_duration_and_the_running_cap_are_settings(start):
    api = Api(start(sim_default_duration_seconds=3600, sim_max_running_jobs=1))
    template(api, "plain")      # no sim label: the default duration
    first, second = submit(api, "plain"), submit(api, "plain")
    assert run_of(api.wait_state(first["id"], "RUNNING")).run_ms == 3_600_000
    assert api.job(second["id"])["state"] == "QUEUED"       # one at a time
    assert api.c.post(f"/v1/jobs/{first['id']}/cancel").status_code == 202
    assert api.wait_state(second["id"], "RUNNING")["state"] == "RUNNING"   # its slot freed


@pytest.mark.parametrize(("values", "says"), [
    ({"sim_default_duration_seconds": 600, "sim_max_duration_seconds": 60},
     "TRAINJOBS_SIM_DEFAULT_DURATION_SECONDS=600 is above TRAINJOBS_SIM_MAX_DURATION_SECONDS=60"),
    ({"sim_capacity": {"core": -1}}, "TRAINJOBS_SIM_CAPACITY names {'core': -1}"),
])
def test_settings_that_could_never_work_refuse_to_start(tmp_path, values, says):
    from service.slices import make_backends

    with pytest.raises(ValueError, match=re.escape(says)):
        make_backends(settings(f"sqlite:///{tmp_path}/db.sqlite", **values))


def test_the_demo_says_what_it_runs_on_the_sim(tmp_path):
    from service.slices import demo_runs

    said = demo_runs(settings(f"sqlite:///{tmp_path}/db.sqlite", sim_speed=60.0))
    assert said == ("runs on sim: a timer of the job's label sim-duration-seconds (default 60 s, at speed 60); "
                    "no process starts")
