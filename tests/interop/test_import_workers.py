"""Import text is parsed in worker processes (service/interop/import_workers.py), not on the
API process's GIL: a parse that runs long is killed and its worker replaced, the import
answered 422 while /healthz answers; the number of imports at once is bounded (503 with
Retry-After). How fast is measured in bench/import_bombs.py, not here."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from service.interop import safe_yaml, shell_text
from tests.conftest import ONE_DATABASE
from tests.interop.conftest import assert_problem
from tests.waiting import wait_for

pytestmark = ONE_DATABASE

ROOT = Path(__file__).resolve().parents[2]
VALID = {"format": "aiplatform-config",
         "source": "scaleTier: CUSTOM\nmasterType: n1-standard-4\nmasterConfig: {imageUri: 'img:1'}\n"}
COMMAND = {"format": "gcloud", "source": "cat > c.yaml <<'EOF'\nworkerPoolSpecs:\n- machineSpec: {machineType: "
                                         "n1-standard-4}\n  replicaCount: 1\n  containerSpec: {imageUri: 'img:1'}\n"
                                         "EOF\ngcloud ai custom-jobs create --region=us-central1 --config=c.yaml"}
# 500,000 values in 1 MB: over 10 s of PyYAML on this project's machines, far past a 2 s limit.
LONG_PARSE = {"format": "vertex-config", "source": "[" + "a," * 500_000 + "]"}
ROOMY = {"import_max_bytes": 1_048_576, "import_max_yaml_nodes": 1_000_000,
         "import_max_yaml_expanded_bytes": 16_777_216, "max_body_bytes": 4 << 20,
         "import_parse_timeout_seconds": 2.0, "import_worker_memory_mb": 4096}


@pytest.fixture
def app_client(api_client, settings, tokens):
    def make(**update):
        return api_client(settings.model_copy(update=update), tokens["admin"])
    return make


def test_the_text_is_parsed_in_another_process(client, monkeypatch):
    # Were the text parsed here, these would fail the import.
    def not_here(*_args, **_kwargs):
        raise AssertionError("import text parsed in the API process")
    monkeypatch.setattr(safe_yaml, "load", not_here)
    monkeypatch.setattr(shell_text, "read_command", not_here)
    r = client.post("/v1/templates:import", json=VALID)
    assert r.status_code == 200, r.text
    r = client.post("/v1/templates:import", json=COMMAND)
    assert r.status_code == 200, r.text
    assert "img:1" in str(r.json()["spec"])
    pids = client.app.state.services.import_workers.pids()
    assert pids and os.getpid() not in pids
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"service.interop.parse_worker" in cmdline
        assert f"PPid:\t{os.getpid()}\n" in Path(f"/proc/{pid}/status").read_text()  # a child of this one


def test_the_worker_imports_no_web_app_and_no_compiler():
    # Namespace packages (google, google.cloud) that site's .pth files set up hold no code: skipped.
    probe = ("import sys, service.interop.parse_worker\n"
             "heavy = ('fastapi', 'starlette', 'pydantic', 'sqlalchemy', 'tensorflow', 'google')\n"
             "ours = ('service.app', 'service.jobspec', 'service.core.config', 'service.interop.service')\n"
             "print(' '.join(sorted(m for m, mod in sys.modules.items() if (m.split('.')[0] in heavy or m in ours)"
             " and getattr(mod, '__file__', None))))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""


def test_a_worker_runs_under_memory_and_cpu_limits(app_client):
    with app_client(import_worker_memory_mb=300, import_parse_timeout_seconds=4.5) as c:
        assert c.post("/v1/templates:import", json=VALID).status_code == 200
        (pid,) = c.app.state.services.import_workers.pids()
        limits = {line[:26].strip(): line[26:].split() for line in Path(f"/proc/{pid}/limits").read_text().splitlines()}
        assert limits["Max address space"][:2] == [str(300 << 20), str(300 << 20)]
        cpu_soft = limits["Max cpu time"][0]
        assert cpu_soft != "unlimited" and 5 <= int(cpu_soft) <= 5 + 1 + 60  # what it used, + 4.5 s, rounded up


def test_a_long_parse_is_killed_the_worker_replaced_and_healthz_answers_meanwhile(app_client):
    with app_client(**ROOMY) as c, ThreadPoolExecutor(1) as pool:
        workers = c.app.state.services.import_workers
        assert c.post("/v1/templates:import", json=VALID).status_code == 200
        (first,) = workers.pids()
        bomb = pool.submit(c.post, "/v1/templates:import", json=LONG_PARSE)
        wait_for(lambda: workers.busy == 1, "the bomb to reach a worker")
        health = c.get("/healthz")
        assert health.status_code == 200
        assert not bomb.done(), "answered while the bomb was still being parsed"
        body = assert_problem(bomb.result(timeout=60), 422, "source")
        assert "took more than 2 s" in body["errors"][0]["message"]
        assert "TRAINJOBS_IMPORT_PARSE_TIMEOUT_SECONDS" in body["errors"][0]["fix"]
        assert first not in workers.pids() and not Path(f"/proc/{first}").exists()  # killed and reaped
        r = c.post("/v1/templates:import", json=VALID)
        assert r.status_code == 200, r.text
        (second,) = workers.pids()
        assert second != first


def test_imports_at_once_are_bounded_503_with_retry_after(app_client):
    with app_client(**ROOMY, import_workers=1, import_queue=1) as c, ThreadPoolExecutor(2) as pool:
        workers = c.app.state.services.import_workers
        bomb = pool.submit(c.post, "/v1/templates:import", json=LONG_PARSE)
        wait_for(lambda: workers.busy == 1, "the bomb to reach the worker")
        queued = pool.submit(c.post, "/v1/templates:import", json=VALID)
        wait_for(lambda: workers.waiting == 1, "the second import to wait")
        refused = c.post("/v1/templates:import", json=VALID)
        body = assert_problem(refused, 503)
        assert refused.headers["Retry-After"] == "2"  # a worker is free by then
        assert "TRAINJOBS_IMPORT_QUEUE" in body["detail"]
        assert_problem(bomb.result(timeout=60), 422, "source")
        # The one that waited gets the new worker once the bomb's is killed.
        r = queued.result(timeout=60)
        assert r.status_code == 200, r.text


def test_a_worker_that_cannot_start_in_time_answers_503(app_client):
    # No interpreter starts in a microsecond.
    with app_client(import_worker_start_seconds=1e-6) as c:
        r = c.post("/v1/templates:import", json=VALID)
        body = assert_problem(r, 503)
        assert "TRAINJOBS_IMPORT_WORKER_START_SECONDS" in body["detail"] and r.headers["Retry-After"]
        assert c.app.state.services.import_workers.pids() == []
        assert c.post("/v1/templates:import", json={"format": "worker-pool-specs", "source": [
            "machine-type=n1-standard-4,container-image-uri=img:1"]}).status_code == 200  # needs no worker


def test_stopping_kills_the_workers_and_answers_503():
    from service.core.errors import Unavailable
    from service.interop.import_workers import ImportWorkers
    from service.slices import Settings, interop_settings
    roomy = Settings(**ROOMY | {"import_parse_timeout_seconds": 60.0})  # no database: the pool alone
    workers = ImportWorkers(roomy)
    outcome: list[BaseException] = []

    def parse():
        try:
            with workers.lease() as lease:
                lease.run("yaml", LONG_PARSE["source"], interop_settings(roomy).yaml)
        except BaseException as e:  # noqa: BLE001 - the test looks at what it was
            outcome.append(e)

    thread = threading.Thread(target=parse)
    thread.start()
    wait_for(lambda: workers.busy == 1 and workers.pids(), "the parse to start")
    (pid,) = workers.pids()
    workers.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert isinstance(outcome[0], Unavailable) and "stopping" in str(outcome[0])
    assert not Path(f"/proc/{pid}").exists() and workers.pids() == []
    with pytest.raises(Unavailable), workers.lease():
        pass
