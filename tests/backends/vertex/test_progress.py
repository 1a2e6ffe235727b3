"""Per-epoch progress of Vertex jobs: the trainer's JSON progress lines (trainer/progress.py)
as Vertex writes them to Cloud Logging (jsonPayload for a JSON line, textPayload
otherwise), read for all running jobs with one entries.list query per interval, within
the Cloud Logging budget, into job.progress by the same rules as local jobs."""
from __future__ import annotations

import json
import time

from tests.fakes.harness import fake_logging, fake_vertex, make_harness  # noqa: F401 - fixtures


def numeric(job: dict) -> str:
    return job["backend_ref"].rsplit("/", 1)[1]


def epoch(n: int, loss: float, task: str = "chief:0") -> dict:
    return {"event": "epoch_end", "epoch": n, "epochs": 3, "steps": 10, "metrics": {"loss": loss, "accuracy": 0.5},
            "examples_per_sec": 100.0, "seconds": 1.5, "task": task}


def running(h, count: int) -> list[dict]:
    jobs = [h.submit() for _ in range(count)]
    for j in jobs:
        h.fake.set_state(j["id"], "JOB_STATE_RUNNING")
    h.reconcile()
    return [h.job(j["id"]) for j in jobs]


def test_running_jobs_show_their_chief_and_evaluator_progress_from_one_query(make_harness, fake_logging):
    with make_harness(vertex_progress_interval_seconds=0) as h:
        a, b = running(h, 2)
        t = time.time_ns()
        logs = fake_logging
        logs.add(numeric(a), "workerpool0-0", {"event": "train_start", "epochs": 3, "task": "chief:0"}, timestamp_ns=t)
        logs.add(numeric(a), "workerpool0-0", epoch(1, 0.9), timestamp_ns=t + 1000)
        logs.add(numeric(a), "workerpool1-0", epoch(1, 0.1, "worker:0"), timestamp_ns=t + 2000)  # not the chief
        logs.add(numeric(a), "workerpool0-0", "Epoch 2/3 a plain line", timestamp_ns=t + 3000)
        logs.add(numeric(b), "workerpool0-0", json.dumps(epoch(2, 0.4)), timestamp_ns=t + 4000)  # as text
        logs.add(numeric(b), "workerpool3-0", {"event": "evaluation", "epoch": 2, "metrics": {"accuracy": 0.8},
                                               "task": "evaluator:0"}, timestamp_ns=t + 5000)
        logs.calls.clear()
        logs.filters.clear()
        h.reconcile()
        assert logs.calls["list"] == 1                      # both jobs, one query
        (f,) = logs.filters
        assert f.startswith('resource.type="ml_job"') and 'timestamp>="' in f
        for n in (numeric(a), numeric(b)):
            assert f'resource.labels.job_id="{n}"' in f
        assert 'resource.labels.task_name="workerpool0-0"' in f and 'resource.labels.task_name="workerpool3-0"' in f
        pa, pb = h.job(a["id"])["progress"], h.job(b["id"])["progress"]
        assert pa["epoch"] == 1 and pa["epochs"] == 3 and pa["metrics"]["loss"] == 0.9 and pa["phase"] == "training"
        assert pa["task"] == "chief:0"
        assert pb["epoch"] == 2 and pb["metrics"]["loss"] == 0.4
        assert pb["evaluation"]["metrics"] == {"accuracy": 0.8}
        # Nothing new: the same progress, and no line counted twice.
        events = len(h.events(a["id"]))
        h.reconcile()
        assert h.job(a["id"])["progress"] == pa and len(h.events(a["id"])) == events
        logs.add(numeric(a), "workerpool0-0", epoch(2, 0.7))
        h.reconcile()
        assert h.job(a["id"])["progress"]["epoch"] == 2


def test_the_last_epochs_are_read_when_the_job_ends(make_harness, fake_vertex, fake_logging):
    with make_harness() as h:   # progress interval of an hour: only the end triggers a read now
        (job,) = running(h, 1)
        first = fake_logging.calls["list"]
        fake_logging.add(numeric(job), "workerpool0-0", epoch(3, 0.2))
        fake_logging.add(numeric(job), "workerpool0-0", {"event": "train_end", "model_dir": "gs://b/x/model",
                                                         "task": "chief:0"})
        h.reconcile()
        assert fake_logging.calls["list"] == first          # not due
        fake_vertex.set_state(job["id"], "JOB_STATE_SUCCEEDED")
        h.reconcile()
        done = h.job(job["id"])
        assert done["state"] == "SUCCEEDED"
        assert done["progress"]["epoch"] == 3 and done["progress"]["phase"] == "finished"
        assert done["progress"]["model_dir"] == "gs://b/x/model"


def test_progress_is_read_once_an_interval_and_only_with_budget_to_spare(make_harness, fake_logging, monkeypatch):
    with make_harness(vertex_progress_interval_seconds=60, logging_reads_per_minute=6,
                      logging_reads_burst=2) as h:
        clock = h.use_clock(monkeypatch)
        (job,) = running(h, 1)                               # the first read: due at once
        fake_logging.add(numeric(job), "workerpool0-0", epoch(1, 0.5))
        reads = fake_logging.calls["list"]
        for _ in range(5):
            clock.advance(10)
            h.reconcile()
        assert fake_logging.calls["list"] == reads           # within the interval: no read
        clock.advance(10)
        h.reconcile()
        assert fake_logging.calls["list"] == reads + 1
        assert h.job(job["id"])["progress"]["epoch"] == 1
        # A person's log pages take the budget; progress leaves them a token and waits.
        fake_logging.add(numeric(job), "workerpool0-0", epoch(2, 0.4))
        clock.advance(60)                                    # due again; the budget full (2)
        assert h.client.get(f"/v1/jobs/{job['id']}/logs").status_code == 200   # 1 token left
        reads = fake_logging.calls["list"]
        h.reconcile()
        assert fake_logging.calls["list"] == reads and h.job(job["id"])["progress"]["epoch"] == 1
        clock.advance(10)
        h.reconcile()
        assert h.job(job["id"])["progress"]["epoch"] == 2
