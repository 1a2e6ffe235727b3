"""Attack: code in a replica that wants the service's database (PostgreSQL on
127.0.0.1:5432 with trust auth, as in this project's own test set-up), Redis, the
API, another job's TensorFlow port or anything else this host listens on. Each
job has a network namespace of its own: its replicas reach each other (the chief
serves on its TF_CONFIG address, the worker connects) and nothing else."""
from __future__ import annotations

import json
import os
import socket
import uuid

import psutil
import psycopg
import pytest

from tests.conftest import PG_ADMIN
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes need the tests to run as root")

PROBE = r'''
import json, os, socket, sys, time
cfg = json.loads(os.environ["TF_CONFIG"])
me, chief = cfg["task"]["type"], cfg["cluster"]["chief"][0]
host, port = chief.rsplit(":", 1)
if me == "chief":
    srv = socket.create_server((host, int(port)))
    srv.settimeout(60)
    conn, _ = srv.accept()          # the worker of this job reaches it
    conn.sendall(b"hello from the chief")
    conn.close()
    print("PEER served", flush=True)
    sys.exit(0)
result = {}
for _ in range(600):                # the chief may not listen yet: bounded retries
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            result["peer"] = s.recv(100).decode()
        break
    except OSError:
        time.sleep(0.05)
targets = json.loads(sys.argv[1])
for name, (h, p) in targets.items():
    try:
        with socket.create_connection((h, p), timeout=2):
            result[name] = "connected"
    except OSError as e:
        result[name] = type(e).__name__
try:
    import psycopg
    with psycopg.connect(sys.argv[2], connect_timeout=3, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS sandbox_attack (x text)")
        c.execute("INSERT INTO sandbox_attack VALUES (%s)", (sys.argv[3],))
    result["db_insert"] = "inserted"
except Exception as e:
    result["db_insert"] = type(e).__name__
print("PROBE " + json.dumps(result), flush=True)
'''


def _host_addresses() -> list[str]:
    return sorted({a.address for addrs in psutil.net_if_addrs().values() for a in addrs
                   if a.family == socket.AF_INET})


def test_replicas_reach_each_other_and_nothing_of_the_host(make_client, work_dir, db_url):
    api = make_client()
    # A port this host listens on, as the API (or another job's unsandboxed server) would.
    listener = socket.create_server(("127.0.0.1", 0))
    api_port = listener.getsockname()[1]
    other = {"container": {"image_uri": "local", "command": ["python", "-c",
             "import socket,time; s=socket.create_server(('127.0.0.1', 2223)); print('LISTENING', flush=True); "
             "time.sleep(600)"]}}
    api.template("other", other)
    other_job = api.submit("other")
    wait_for(lambda: any(ln["message"] == "LISTENING" for ln in api.all_logs(other_job["id"])), "the other job")

    targets = {"postgres": ["127.0.0.1", 5432], "redis": ["127.0.0.1", 6379], "api": ["127.0.0.1", api_port],
               "other_job": ["127.0.0.1", 2223]}
    for i, addr in enumerate(a for a in _host_addresses() if not a.startswith("127.")):
        targets[f"host_{i}"] = [addr, 5432]
    marker = uuid.uuid4().hex
    api.template("probe", {
        "container": {"image_uri": "local", "command": ["python", "-c", PROBE, json.dumps(targets), PG_ADMIN, marker]},
        "chief": {}, "workers": {"replica_count": 1}})
    job = api.submit("probe")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    listener.close()
    assert done["state"] == "SUCCEEDED", done["error"]
    lines = [ln["message"] for ln in api.all_logs(job["id"])]
    assert "PEER served" in lines
    [probe] = [json.loads(m[len("PROBE "):]) for m in lines if m.startswith("PROBE ")]
    # The job's own cluster works (so the refusals below are the sandbox, not a broken probe).
    assert probe.pop("peer") == "hello from the chief"
    # "other_job": the other job listens on 127.0.0.1:2223 of its own namespace; here that
    # address is the worker's own (it does not listen), never the other job's server.
    assert probe.pop("db_insert") != "inserted"
    assert all(v != "connected" for v in probe.values()), probe
    assert set(probe) == set(targets)
    with psycopg.connect(PG_ADMIN) as c:  # and nothing reached the database
        exists = c.execute("SELECT to_regclass('sandbox_attack')").fetchone()[0]
        if exists:
            assert not c.execute("SELECT 1 FROM sandbox_attack WHERE x = %s", (marker,)).fetchone()
    api.c.post(f"/v1/jobs/{other_job['id']}/cancel")
    api.wait_state(other_job["id"], "CANCELLED", "FAILED")
