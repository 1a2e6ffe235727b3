"""A client generated from the live /openapi.json by openapi-python-client works:
it has readable operation names and one type per answer, and it drives
create -> wait -> logs against the real service."""
from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.client.conftest import TINY_PARAMETERS, tiny_spec
from tests.waiting import wait_for

PACKAGE = "trainjobs_generated"


def generate(url: str, where: Path):
    bin_dir = Path(sys.executable).parent  # ruff, which the generator runs, lives beside it
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(bin_dir / "openapi-python-client"), "generate", "--url", f"{url}/openapi.json",
                           "--meta", "none", "--output-path", str(where / PACKAGE), "--fail-on-warning"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]  # one generation per test (SQLite, then PostgreSQL)
    importlib.invalidate_caches()
    return importlib.import_module(PACKAGE)


def test_generated_client_creates_waits_and_reads_logs(server, token, tj, tmp_path):
    tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS)
    gen = generate(server, tmp_path)
    try:
        from trainjobs_generated.api.jobs import jobs_create, jobs_get
        from trainjobs_generated.api.logs import jobs_logs
        from trainjobs_generated.models import (
            JobCreate,
            JobOut,
            JobState,
            LogPageOut,
            ProblemDetails,
        )

        # One model per status: the create answer is a job, a dry-run preview or a problem.
        returned = inspect.signature(jobs_create.sync).return_annotation
        assert [getattr(t, "__name__", str(t)) for t in returned.__args__] == \
            ["JobOut", "JobPreview", "ProblemDetails", "NoneType"]

        client = gen.AuthenticatedClient(base_url=server, token=token, raise_on_unexpected_status=True)
        job = jobs_create.sync(client=client, body=JobCreate.from_dict({"template": "tiny",
                                                                         "parameters": {"epochs": 3}}))
        assert isinstance(job, JobOut), job

        final = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.EXPIRED}
        done = wait_for(lambda: (j := jobs_get.sync(client=client, job_id=job.id)).state in final and j,
                        "the job to end")
        assert done.state == JobState.SUCCEEDED
        assert (done.progress.epoch, done.progress.epochs) == (3, 3)  # typed progress

        page = jobs_logs.sync(client=client, job_id=job.id)
        assert isinstance(page, LogPageOut) and page.done
        chief = [ln.message for ln in page.lines if ln.replica == "workerpool0-0"]
        assert chief[0] == "hello from workerpool0-0 as chief:0" and chief[-1] == "tag=x"

        missing = jobs_get.sync(client=client, job_id=uuid.uuid4())
        assert isinstance(missing, ProblemDetails) and missing.status == 404
        bad = jobs_create.sync(client=client, body=JobCreate.from_dict({"template": "tiny",
                                                                         "parameters": {"epochs": 0}}))
        assert isinstance(bad, ProblemDetails) and bad.status == 422
        assert [e.field for e in bad.errors] == ["parameters.epochs"]
    finally:
        sys.path.remove(str(tmp_path))
