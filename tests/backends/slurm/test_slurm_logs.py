"""A Slurm job's logs followed live as Server-Sent Events, from a real uvicorn server:
lines from both nodes while the job runs, then `end` with its final state."""
from __future__ import annotations

import json

import httpx
from httpx_sse import connect_sse

from service.app import create_app
from tests.backends.localkit import thread_server
from tests.backends.slurm.conftest import SlurmApi, slurm_settings, spec
from tests.conftest import bearer


def test_follow_a_slurm_jobs_logs_until_it_ends(db_url, cluster, slurm_work_dir, token, tmp_path):
    gate = tmp_path / "gate"
    settings = slurm_settings(db_url, cluster, slurm_work_dir)
    with thread_server(create_app(settings)) as url, \
            httpx.Client(base_url=url, headers=bearer(token), timeout=httpx.Timeout(60.0)) as client:
        api = SlurmApi(client)
        api.template("stream", spec(["--lines", "3", "--wait-file", str(gate)],
                                    workers=["--lines", "2", "--wait-file", str(gate)]))
        job_id = api.submit("stream")["id"]
        seen, end = [], None
        with connect_sse(client, "GET", f"/v1/jobs/{job_id}/logs", params={"follow": "true"}) as source:
            for sse in source.iter_sse():
                if sse.event == "end":
                    end = json.loads(sse.data)
                    break
                seen.append(json.loads(sse.data))
                if len(seen) == 5:       # every line printed before the gate, live: now let it finish
                    gate.touch()
        assert end is not None and end["state"] == "SUCCEEDED", end
        assert sorted(d["replica"] for d in seen) == ["workerpool0-0"] * 3 + ["workerpool1-0"] * 2
        assert sorted(d["message"] for d in seen) == sorted(ln["message"] for ln in api.all_logs(job_id))
