"""The demo end to end: mwms-demo (a chief and a worker, the packaged trainer,
MultiWorkerMirroredStrategy on 127.0.0.1) through the API on the local backend.
Real TensorFlow, so one run only (SQLite)."""
from __future__ import annotations

from pathlib import Path

import pytest

from service.demo import demo_template
from tests.backends.localkit import (
    Api,
    assert_no_processes,
    kill_all,
    run_path,
    settings_for,
)
from tests.conftest import make_token
from tests.trainer.test_startup_noise import CUDA_NOISE

pytestmark = pytest.mark.slow


@pytest.fixture
def sqlite_url(sqlite_template_db, tmp_path) -> str:
    db = tmp_path / "trainjobs.db"
    db.write_bytes(sqlite_template_db.read_bytes())
    return f"sqlite:///{db}"


def test_mwms_demo_trains_and_saves_the_model(api_client, sqlite_url, tmp_path):
    work_dir = tmp_path / "runs"
    token = make_token(sqlite_url, "alpha", "admin")
    try:
        with api_client(settings_for(sqlite_url, work_dir), token) as client:
            api = Api(client)
            r = client.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True))
            assert r.status_code == 201, r.text
            job = api.submit("mwms-demo")
            done = api.wait_state(job["id"], "SUCCEEDED", "FAILED", timeout=600)
            assert done["state"] == "SUCCEEDED", done["error"]

            run = run_path(done)
            model = run / "output" / "model"
            assert (model / "saved_model.pb").is_file()
            progress = done["progress"]
            assert progress["epoch"] == progress["epochs"] == 2 and progress["phase"] == "finished"
            assert {"loss", "accuracy"} <= set(progress["metrics"]) and progress["task"] == "chief:0"
            assert Path(progress["model_dir"]).resolve() == model.resolve()

            lines = api.all_logs(job["id"])
            # The chief speaks for the job: only it prints progress lines (docs/trainer.md);
            # the worker trained too (its stderr shows it) but prints no epoch_end.
            stdout = {task: [ln["message"] for ln in lines if ln["replica"] == task and ln["stream"] == "stdout"]
                      for task in ("workerpool0-0", "workerpool1-0")}
            assert any('"event": "epoch_end"' in m and '"task": "chief:0"' in m for m in stdout["workerpool0-0"])
            assert not any('"event": "epoch_end"' in m for m in stdout["workerpool1-0"]), stdout["workerpool1-0"][-5:]
            assert any(ln["replica"] == "workerpool1-0" for ln in lines)
            # A CPU-only job's logs carry no CUDA start-up errors (trainer/startup_noise.py).
            noise = [ln["message"] for ln in lines if CUDA_NOISE.search(ln["message"])]
            assert noise == [], noise
            assert_no_processes(work_dir)
    finally:
        kill_all(work_dir)
