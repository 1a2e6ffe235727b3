"""The local backend with real processes, through the HTTP API and the real
reconciler thread, on SQLite and PostgreSQL. Replicas are programs/replica.py."""
from __future__ import annotations

import json

import psutil
import pytest

from service.backends.local import LocalBackend
from service.backends.local.entry import local_settings_of
from service.jobspec import Replica
from tests.backends.localkit import PROGRAM, assert_no_processes, job_processes, read_json, run_path, settings_for, spec
from tests.waiting import wait_for

GATED = {"name": "gate", "type": "string", "description": "the replicas wait for this file"}


def gated_template(api, name: str, **roles) -> None:
    api.template(name, spec(["--wait-file", "${gate}"], workers=["--wait-file", "${gate}"], **roles),
                 parameters=[GATED])


def test_two_replicas_succeed(make_client, work_dir):
    api = make_client()
    api.template("two", spec(["--lines", "3"], workers=["--lines", "2", "--stderr-lines", "1"]))
    job = api.submit("two")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    assert done["error"] is None and done["started_at"] and done["ended_at"]
    assert [e["to_state"] for e in api.events(job["id"])] == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]

    run = run_path(done)
    assert run.parent == work_dir.resolve() and run.name == job["id"]
    for task in ("workerpool0-0", "workerpool1-0"):
        assert read_json(run / "replicas" / f"{task}.exit")["exit_code"] == 0
    lines = api.all_logs(job["id"])
    by_replica = {(ln["replica"], ln["stream"], ln["message"]) for ln in lines}
    assert ("workerpool0-0", "stdout", "hello from workerpool0-0 as chief:0") in by_replica
    assert ("workerpool1-0", "stdout", "hello from workerpool1-0 as worker:0") in by_replica
    assert ("workerpool1-0", "stderr", "workerpool1-0 err 0") in by_replica
    assert len(lines) == 1 + 3 + 1 + 2 + 1
    assert_no_processes(work_dir)
    wait_for(lambda: read_json(run / "state.json")["gone"], "the run to be marked gone")


def test_worker_exit_1_fails_job_and_stops_chief(make_client, work_dir):
    api = make_client()
    # The chief would run for ten minutes and leaves a grandchild behind: both must go.
    api.template("dies", spec(["--sleep", "600", "--spawn-child"],
                              workers=["--lines", "2", "--message", "worker gives up: boom", "--exit", "1"]))
    job = api.submit("dies")
    failed = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert failed["state"] == "FAILED"
    err = failed["error"]
    assert err["replica"] == "workerpool1-0" and err["exit_code"] == 1 and err["code"] == 1
    assert "workerpool1-0" in err["message"] and "worker gives up: boom" in err["message"]
    assert err["log_tail"][-1] == "worker gives up: boom"
    final = [e for e in api.events(job["id"]) if e["to_state"] == "FAILED"][0]
    assert "workerpool1-0" in final["reason"] and "exited with code 1" in final["reason"]
    assert "other replicas were stopped" in final["reason"]
    assert_no_processes(work_dir, job["id"])  # the chief, its child and every wrapper


def test_replica_that_cannot_start_fails_the_job(make_client, work_dir):
    api = make_client()
    api.template("nocmd", spec([], command=["trainjobs-no-such-command-xyz"]))
    job = api.submit("nocmd")
    failed = api.wait_state(job["id"], "FAILED", "SUCCEEDED")
    assert failed["state"] == "FAILED"
    assert failed["error"]["exit_code"] == 127 and failed["error"]["replica"] == "workerpool0-0"
    assert "cannot start" in failed["error"]["message"]
    assert_no_processes(work_dir)


def test_cancel_running_job_stops_every_process(make_client, work_dir):
    api = make_client(local_cancel_grace_seconds=1.0)
    # The worker ignores SIGTERM: only the SIGKILL after the grace period stops it.
    api.template("long", spec(["--sleep", "600", "--spawn-child"], workers=["--sleep", "600", "--ignore-sigterm"]))
    job = api.submit("long")
    api.wait_state(job["id"], "RUNNING")
    wait_for(lambda: len(job_processes(work_dir, job["id"])) >= 5, "wrappers, replicas and the grandchild")
    # Ready means: each replica said hello, which it does after installing its SIGTERM
    # handler (a SIGTERM before that would end the worker at once, not after the grace).
    wait_for(lambda: {ln["replica"] for ln in api.all_logs(job["id"]) if ln["message"].startswith("hello")}
             == {"workerpool0-0", "workerpool1-0"}, "both replicas to be ready")

    r = api.c.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 202, r.text
    assert r.json()["state"] in ("CANCELLING", "CANCELLED")
    done = api.wait_state(job["id"], "CANCELLED", "FAILED", "SUCCEEDED")
    assert done["state"] == "CANCELLED"
    assert job_processes(work_dir, job["id"], inits=True) == []  # CANCELLED only once nothing is left
    events = api.events(job["id"])
    assert [e["to_state"] for e in events][-2:] == ["CANCELLING", "CANCELLED"]
    assert "SIGKILL" in events[-1]["reason"]
    assert_no_processes(work_dir)


def test_queue_cap_runs_jobs_in_order(make_client, work_dir, tmp_path):
    api = make_client(local_max_running_jobs=1)
    gated_template(api, "gated")
    gates = [tmp_path / f"gate{i}" for i in range(3)]
    jobs = [api.submit("gated", parameters={"gate": str(g)}) for g in gates]
    first = api.wait_state(jobs[0]["id"], "RUNNING")
    assert first["state"] == "RUNNING"
    for j in jobs[1:]:
        assert api.job(j["id"])["state"] == "QUEUED"
        assert not (work_dir / j["id"]).exists()  # nothing launched for a queued job

    gates[2].touch()  # the youngest could finish at once, but must not jump the queue
    gates[0].touch()
    api.wait_state(jobs[0]["id"], "SUCCEEDED")
    api.wait_state(jobs[1]["id"], "RUNNING")
    assert api.job(jobs[2]["id"])["state"] == "QUEUED"
    gates[1].touch()
    api.wait_state(jobs[2]["id"], "SUCCEEDED")
    ended = [api.job(j["id"]) for j in jobs]
    assert [j["state"] for j in ended] == ["SUCCEEDED"] * 3
    assert ended[0]["ended_at"] <= ended[1]["started_at"] and ended[1]["ended_at"] <= ended[2]["started_at"]
    assert_no_processes(work_dir)


def test_cancel_queued_job_never_launches_it(make_client, work_dir, tmp_path):
    api = make_client(local_max_running_jobs=1)
    gated_template(api, "gated")
    blocker = api.submit("gated", parameters={"gate": str(tmp_path / "g0")})
    queued = api.submit("gated", parameters={"gate": str(tmp_path / "g1")})
    api.wait_state(blocker["id"], "RUNNING")
    r = api.c.post(f"/v1/jobs/{queued['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING", r.text
    assert api.wait_state(queued["id"], "CANCELLED")["backend_ref"] is None
    (tmp_path / "g0").touch()
    api.wait_state(blocker["id"], "SUCCEEDED")
    assert api.job(queued["id"])["state"] == "CANCELLED"
    assert not (work_dir / queued["id"]).exists()
    assert_no_processes(work_dir)


def test_reduction_server_is_refused_at_submit(make_client):
    api = make_client()
    s = spec(["--exit", "0"], workers=[])
    gpus = dict(machine_type="n1-standard-16", accelerator_type="NVIDIA_TESLA_V100", accelerator_count=2)
    s["workers"].update(gpus)
    s["chief"].update(gpus)
    s["reduction_server"] = {"replica_count": 2, "client_installed": True}
    api.template("rs", s)
    r = api.c.post("/v1/jobs", json={"template": "rs", "backend": "local"})
    assert r.status_code == 422, r.text
    problem = r.json()
    fields = {e["field"]: e for e in problem["errors"]}
    assert "reduction_server" in fields and "local" in fields["reduction_server"]["message"]
    assert "vertex" in fields["reduction_server"]["fix"]
    assert api.c.get("/v1/jobs").json()["items"] == []
    # The same template runs locally once the override drops the Reduction Server.
    job = api.submit("rs", overrides={"reduction_server": None})
    assert api.wait_state(job["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"


def test_progress_lines_show_in_the_job(make_client, work_dir, tmp_path):
    api = make_client()
    gate = tmp_path / "gate"
    api.template("progress", spec(["--epochs", "3", "--wait-file", str(gate)], workers=["--wait-file", str(gate)]))
    job = api.submit("progress")

    def epoch3():
        # The chief's epochs may be read in the very pass before every replica is seen
        # started (PENDING): wait for both signals.
        j = api.job(job["id"])
        return j if (j["progress"] or {}).get("epoch") == 3 and j["state"] == "RUNNING" else None
    running = wait_for(epoch3, "progress to show epoch 3 while RUNNING")
    p = running["progress"]
    assert p["epochs"] == 3 and p["steps"] == 10 and p["task"] == "chief:0"
    assert p["metrics"] == {"loss": pytest.approx(1 / 3), "accuracy": pytest.approx(0.53)}
    gate.touch()
    assert api.wait_state(job["id"], "SUCCEEDED")["progress"]["epoch"] == 3


def test_each_replica_gets_the_vertex_environment(make_client, work_dir, tmp_path, monkeypatch):
    # Whatever the service's own environment holds must not leak into a replica's.
    monkeypatch.setenv("TF_CONFIG", '{"bogus": true}')
    monkeypatch.setenv("AIP_MODEL_DIR", "/bogus/")
    api = make_client()
    dump = tmp_path / "env"
    dump.mkdir()
    dump.chmod(0o777)  # the replicas, unprivileged uids when the tests run as root, write here
    args = ["--dump-env", str(dump)]
    # The chief waits for every other replica's dump: the job ends when the chief does, and the
    # others are stopped then (a worker slow to start on a loaded host had not written its own).
    chief_args = args + [a for task in ("workerpool1-0", "workerpool1-1", "workerpool2-0", "workerpool3-0")
                         for a in ("--wait-file", str(dump / f"{task}.json"))]
    s = spec(chief_args, workers=args, worker_count=2, ps=args, evaluator=args, base_output="gs://bucket/exp1")
    s["container"]["env"] = {"MY_SETTING": "from-template"}
    api.template("full", s)
    job = api.submit("full")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    run = run_path(done)

    roles = {"workerpool0-0": ("chief", 0), "workerpool1-0": ("worker", 0), "workerpool1-1": ("worker", 1),
             "workerpool2-0": ("ps", 0), "workerpool3-0": ("evaluator", 0)}
    envs = {task: json.loads((dump / f"{task}.json").read_text()) for task in roles}
    cluster_spec = json.loads(envs["workerpool0-0"]["CLUSTER_SPEC"])
    pools = cluster_spec["cluster"]
    assert list(pools) == ["workerpool0", "workerpool1", "workerpool2", "workerpool3"]
    assert [len(v) for v in pools.values()] == [1, 2, 1, 1]
    addresses = [a for v in pools.values() for a in v]
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert len({a.rsplit(":", 1)[1] for a in addresses}) == 5  # a port of its own each
    job_spec = cluster_spec["job"]
    assert len(job_spec["worker_pool_specs"]) == 4  # the CustomJobSpec, proto field names
    assert job_spec["worker_pool_specs"][0]["container_spec"]["image_uri"] == "trainjobs-test:1"
    assert job_spec["base_output_directory"]["output_uri_prefix"] == "gs://bucket/exp1"

    for task, (tf_type, index) in roles.items():
        env = envs[task]
        pool = task.split("-")[0]
        tf_config = json.loads(env["TF_CONFIG"])
        # The evaluator is never part of the cluster; every replica sees the same cluster.
        assert tf_config["cluster"] == {"chief": pools["workerpool0"], "worker": pools["workerpool1"],
                                        "ps": pools["workerpool2"]}
        assert tf_config["task"] == {"type": tf_type, "index": index}
        assert tf_config["environment"] == "cloud" and tf_config["job"] == job_spec
        cs = json.loads(env["CLUSTER_SPEC"])
        assert cs == {"cluster": pools, "environment": "cloud", "task": {"type": pool, "index": index},
                      "job": job_spec}
        assert env["AIP_MODEL_DIR"] == f"{run}/output/model/"
        assert env["AIP_CHECKPOINT_DIR"] == f"{run}/output/checkpoints/"
        assert env["AIP_TENSORBOARD_LOG_DIR"] == f"{run}/output/logs/"
        assert env["MY_SETTING"] == "from-template" and env["PYTHONUNBUFFERED"] == "1"
        assert env["TRAINJOBS_LOCAL_REPLICA"] == f"{job['id']}/{task}"
        # Nothing of the service's own environment: a minimal base, Vertex's variables, the template's.
        vertex = {"TF_CONFIG", "CLUSTER_SPEC", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR"}
        assert set(env) - vertex - {"MY_SETTING"} == {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL",
                                                       "PYTHONUNBUFFERED", "TRAINJOBS_LOCAL_REPLICA"}
        assert env["HOME"] == f"{run}/work/home" and env["TMPDIR"] == f"{run}/work/tmp"
    # The job view tells exactly what each replica got: its 127.0.0.1 ports, the run's folders.
    assert {r["task_name"]: r["env"] for r in api.job(job["id"])["cluster"]} == envs

    # One replica: no TF_CONFIG (Vertex sets it for distributed jobs only). No base output
    # directory in the template: the run's own, as Vertex uses the service's default.
    # (A folder of its own: each job's replicas run as a uid of their own, and cannot
    # overwrite the first job's files.)
    dump2 = tmp_path / "env2"
    dump2.mkdir()
    dump2.chmod(0o777)
    api.template("single", spec(["--dump-env", str(dump2)], base_output=None))
    single = api.submit("single")
    assert api.wait_state(single["id"], "SUCCEEDED", "FAILED")["state"] == "SUCCEEDED"
    env = json.loads((dump2 / "workerpool0-0.json").read_text())
    assert "TF_CONFIG" not in env
    assert env["AIP_MODEL_DIR"] == f"{api.run_path(single['id'])}/output/model/"
    assert json.loads(env["CLUSTER_SPEC"])["task"] == {"type": "workerpool0", "index": 0}
    assert_no_processes(work_dir)


def test_command_defaults_to_the_trainer_and_python_is_this_environment(tmp_path):
    backend = LocalBackend(local_settings_of(settings_for("sqlite://", tmp_path, local_python="/opt/py/bin/python3")))
    trainer = Replica(0, 0, "workerpool0-0", "chief", "img", (), ("--epochs=1",))
    assert backend.command_of(trainer) == ["/opt/py/bin/python3", "-m", "trainer.task", "--epochs=1"]
    own = Replica(0, 0, "workerpool0-0", "chief", "img", ("python", str(PROGRAM)), ("--exit", "0"))
    assert backend.command_of(own) == ["/opt/py/bin/python3", str(PROGRAM), "--exit", "0"]
    other = Replica(0, 0, "workerpool0-0", "chief", "img", ("bash", "-c", "true"), ())
    assert backend.command_of(other) == ["bash", "-c", "true"]


def test_the_service_reaps_its_replicas(make_client, work_dir):
    api = make_client()
    api.template("two", spec(["--exit", "0"], workers=["--exit", "0"]))
    job = api.submit("two")
    done = api.wait_state(job["id"], "SUCCEEDED")
    pids = [r["pid"] for r in read_json(run_path(done) / "state.json")["replicas"].values()]
    assert len(pids) == 2 and all(pids)

    def reaped():
        # A child that exited but was not waited for stays a zombie under this process.
        return not [p for p in psutil.Process().children() if p.pid in pids]
    wait_for(reaped, "the wrappers to be reaped, not left as zombies")


def test_a_cancel_while_queued_means_it_never_launches(make_client, work_dir):
    """The cancel lands before the controller admits the job: nothing is ever started."""
    api = make_client(local_max_running_jobs=0, run_reconciler=False)
    api.template("never", spec(["--exit", "0"]))
    job = api.submit("never")
    api.c.app.state.services.controller.run_once()
    assert api.job(job["id"])["state"] == "QUEUED"  # the cap holds it
    assert api.c.post(f"/v1/jobs/{job['id']}/cancel").json()["state"] == "CANCELLING"
    api.c.app.state.services.controller.run_once()
    done = api.job(job["id"])
    assert done["state"] == "CANCELLED" and done["backend_ref"] is None
    assert not (work_dir / job["id"]).exists()
