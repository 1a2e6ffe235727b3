"""Slurm arbitrates its own cluster (issue 38, point 6), against the real daemons: a team's
account and a priority class's QoS reach sbatch; a job Slurm preempts and requeues under
the same id is followed (one event, never failed) and resumes from its checkpoint; a job Slurm
preempts otherwise (not requeueable, or with a GraceTime it ended within: issue 48, point 3) is
a preemption whose next attempt resumes; and trainjobs' own preemption sends SIGTERM to the
tasks, then SIGKILL once the grace is over, its error where docs/slurm.md says (issue 48, point 4).

The test cluster (cluster.py) preempts by partition (PreemptType=preempt/partition_prio,
PreemptMode=REQUEUE, partition `urgent` above `debug`): QoS preemption needs slurmdbd, which
the test cluster does not run (docs/slurm.md, "Sharing the cluster")."""
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from service import jobspec
from service.auth.service import get_or_create_team
from service.backends.slurm import SlurmBackend, SlurmConfigError, poller
from service.backends.slurm.entry import slurm_config_of
from service.lifecycle.protocol import JobHandle, Observation, PermanentBackendError
from service.lifecycle.states import TERMINAL, JobState
from service.persistence.models import TeamShare, utcnow
from service.persistence.session import make_engine, make_session_factory
from tests.backends.slurm.cluster import GRACE_SECONDS
from tests.backends.slurm.conftest import JOB_USER, slurm_settings, spec
from tests.conftest import bearer, make_token
from tests.waiting import wait_for

S = JobState
ACCOUNTS = {"vision": "acct-vision"}
QOS = {"urgent": "high"}


def _backend(cluster, work_dir: Path, tmp_path: Path, **overrides) -> SlurmBackend:
    db_url = f"sqlite:///{tmp_path}/unused.db"   # no service runs: the settings only need a URL
    backend = SlurmBackend(slurm_config_of(slurm_settings(db_url, cluster, work_dir, **overrides)))
    backend.start_client()
    return backend


def _handle(args: list[str], *, team: str | None = "vision", priority_class: str | None = "urgent",
            labels: dict | None = None, workers: list[str] | None = None) -> JobHandle:
    _, compiled = jobspec.build(spec(args, labels=labels or {}, workers=workers), [], {}, None, display_name="t",
                                labels={})
    return JobHandle(uuid.uuid4(), S.QUEUED, None, compiled, utcnow(), team=team, priority_class=priority_class)


class Follower:
    """The controller's part, by hand: polls the backend and applies the states it reports to
    its own handle, keeping every observation (a real service is in test_slurm_backend.py)."""

    def __init__(self, backend: SlurmBackend, job: JobHandle, ref: str):
        self.backend, self.seen = backend, []
        self.job = JobHandle(job.id, S.PENDING, ref, job.compiled, job.created_at, team=job.team,
                             priority_class=job.priority_class)

    def poll(self) -> list[Observation]:
        self.backend.begin_pass()
        try:
            obs = self.backend.poll([self.job])
        finally:
            self.backend.end_pass()
        self.seen += obs
        for o in obs:
            if o.state is not None and self.job.state not in TERMINAL:
                self.job.state = o.state
        return obs

    def until(self, predicate, what: str, timeout: float = 60.0) -> None:
        wait_for(lambda: (self.poll(), predicate())[1], what, timeout, 0.2)


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def release_after_the_requeues_second(cluster, ref: str) -> None:
    """`scontrol update StartTime=now` for a job Slurm requeued, once the clock is past the
    second of its requeue. slurmd revokes the first run's credential at the requeue and refuses
    any launch credential made in that same second ("Job N already killed, do not launch batch
    job"; slurmctld: "Killing non-startable batch JobId=N: Job credential revoked"): the job
    then ends FAILED, batch script status 1. Slurm's own hold (about two minutes) never meets
    this; a release at once did, about one run in five. A requeue resets the job's submit_time
    to its own second (squeue --json)."""
    def requeued_at() -> int | None:
        job = next((j for j in cluster.squeue_json()["jobs"] if str(j.get("job_id")) == ref), None)
        return job["submit_time"] if job and job.get("restart_cnt") else None
    second = wait_for(requeued_at, f"Slurm job {ref} to show its requeue", 30)
    wait_for(lambda: time.time() >= second + 1, f"the clock to pass the second of job {ref}'s requeue", 5)
    cluster.run("scontrol", "update", f"JobId={ref}", "StartTime=now")


def _sbatch_args(backend: SlurmBackend) -> list[list[str]]:
    """Every sbatch argv the backend really ran (the real client, recorded on the way)."""
    calls: list[list[str]] = []
    real = backend.cli.sbatch

    def recording(argv: list[str]) -> str:
        calls.append(list(argv))
        return real(argv)
    backend.cli.sbatch = recording   # type: ignore[method-assign]
    return calls


def test_the_teams_account_and_the_classs_qos_reach_slurm(cluster, slurm_work_dir, tmp_path):
    backend = _backend(cluster, slurm_work_dir, tmp_path, slurm_team_accounts=ACCOUNTS, slurm_priority_qos=QOS)
    argvs = _sbatch_args(backend)
    ref = backend.submit(_handle(["--lines", "1"])).backend_ref
    assert ref
    # Slurm's own record of the job: the team's account (QoS is kept only with accounting, i.e.
    # slurmdbd; without it Slurm takes --qos and shows "(null)", so the argv says it).
    account = cluster.run("squeue", "-h", "--states=all", "-j", ref, "-o", "%a").strip()
    assert account == "acct-vision"
    assert "--account=acct-vision" in argvs[0] and "--qos=high" in argvs[0]
    # Another team and another class: nothing of the mappings (today's defaults and labels).
    other = backend.submit(_handle(["--lines", "1"], team="nlp", priority_class="batch")).backend_ref
    assert other and not any(a.startswith(("--account=", "--qos=")) for a in argvs[1])
    # A member's label cannot move the job to another account or a stronger QoS: refused, naming both.
    with pytest.raises(PermanentBackendError, match="TRAINJOBS_SLURM_TEAM_ACCOUNTS.*acct-vision"):
        backend.submit(_handle(["--lines", "1"], labels={"slurm-account": "acct-nlp"}))
    with pytest.raises(PermanentBackendError, match="TRAINJOBS_SLURM_PRIORITY_QOS.*'high'"):
        backend.submit(_handle(["--lines", "1"], labels={"slurm-qos": "top"}))
    assert len(argvs) == 2   # the refusals never reached sbatch


@pytest.mark.parametrize("mapping", [{"slurm_team_accounts": {"vision": "a b"}},
                                     {"slurm_priority_qos": {"urgent": "--uid=0"}},
                                     {"slurm_team_accounts": {"vision": ""}}])
def test_a_mapping_that_is_no_slurm_name_is_refused_at_start(cluster, slurm_work_dir, tmp_path, mapping):
    setting = "TEAM_ACCOUNTS" if "slurm_team_accounts" in mapping else "PRIORITY_QOS"
    with pytest.raises(SlurmConfigError, match=f"TRAINJOBS_SLURM_{setting}.*is not a Slurm name"):
        _backend(cluster, slurm_work_dir, tmp_path, **mapping)


@pytest.mark.parametrize("workers", [None, 1], ids=["chief", "chief+worker"])
def test_a_job_slurm_preempts_and_requeues_is_followed_and_resumes(cluster, slurm_work_dir, tmp_path, workers):
    """Real preemption: a job of partition `urgent` needs both nodes; ours (8 CPUs a task, a whole
    node each, requeueable) is requeued by Slurm under the same id, restarts and resumes from its
    checkpoint. With two roles the restarted tasks meet again at new addresses (not the first run's)."""
    backend = _backend(cluster, slurm_work_dir, tmp_path, slurm_requeue=True, slurm_cpus_per_task=8)
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    job = _handle(["--checkpoint", "--dump-env", str(gate), "--wait-file", str(gate / "go")],
                  workers=None if workers is None else ["--wait-file", str(gate / "go")])
    ref = backend.submit(job).backend_ref
    assert ref
    f = Follower(backend, job, ref)
    run = backend.run_of(job.id)
    f.until(lambda: f.job.state == S.RUNNING and "saved checkpoint" in _text(run.log("workerpool0-0")),
            "the job to run and save its checkpoint")
    urgent = cluster.run("sbatch", "--parsable", f"--uid={JOB_USER}", "--chdir=/tmp", "--output=/dev/null",
                         "-p", "urgent", "-N2", "--exclusive", "--wrap", "true").strip()
    f.until(lambda: any(o.note for o in f.seen), "the requeue to be seen")
    note = next(o.note for o in f.seen if o.note)
    assert note.startswith("requeued by Slurm (preempted)") and f"Slurm job {ref}" in note
    assert f.job.state == S.RUNNING and not any(o.state in TERMINAL for o in f.seen), f.seen
    # Slurm holds a requeued job back for a while (its BeginTime); an admin may let it go now.
    wait_for(lambda: cluster.run("squeue", "-h", "--states=all", "-j", urgent, "-o", "%T").strip() == "COMPLETED",
             "the urgent job to run", 60)
    release_after_the_requeues_second(cluster, ref)
    (gate / "go").touch()
    f.until(lambda: f.job.state in TERMINAL, "the requeued job to end", 90)
    # Whole, when it fails (once, on a host loaded beyond CI's, it ended FAILED: the reason and the
    # task logs say why next time).
    # One string (pytest cuts a tuple's repr short): the reason, the batch script's output (srun's
    # errors, "step failed with status N"), and each task's exit record and log tail.
    tasks = ["workerpool0-0"] + (["workerpool1-0"] if workers else [])
    assert f.job.state == S.SUCCEEDED, "\n".join(
        [f"reason: {f.seen[-1].reason}", f"slurm.out:\n{_text(run.batch_output)[-3000:]}"]
        + [f"{t} exit: {run.task_record(t, 'exit')}\n{t} log:\n{_text(run.log(t))[-2000:]}" for t in tasks])
    assert "resumed from checkpoint step-7 (Slurm restart 1)" in run.log("workerpool0-0").read_text()
    assert sum(1 for o in f.seen if o.note) == 1   # one event per restart, however many passes saw it
    assert (run.read_state() or {}).get("slurm_restarts") == 1
    if workers:   # the second run's tasks rendezvoused on their own addresses, and both ended well
        worker = run.task_record("workerpool1-0", "addr")
        assert worker["restart"] == "1"
        tf_config = json.loads(json.loads((gate / "chief-0.json").read_text())["TF_CONFIG"])
        assert tf_config["cluster"]["worker"] == [worker["address"]]   # the second run's, never the first's
        assert run.task_record("workerpool1-0", "exit")["exit_code"] == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)   # the lifecycle's part is the same on both
@pytest.mark.parametrize("partition, requeue", [("debug", True), ("debug", False), ("grace", True), ("grace", False)],
                         ids=["no-grace-requeue", "no-grace-no-requeue", f"grace-{GRACE_SECONDS}s-requeue",
                              f"grace-{GRACE_SECONDS}s-no-requeue"])
def test_a_job_slurm_preempts_resumes_from_the_checkpoint_it_saved_on_sigterm(make_slurm_client, cluster, tmp_path,
                                                                                partition, requeue):
    """A job `urgent` preempts, its partition with or without a GraceTime, requeueable or not.
    Its task saves a checkpoint on SIGTERM and exits 143 (as the packaged trainer does). Without a
    grace and requeueable, Slurm requeues it: one event, same job, same run folder. Otherwise it
    ends (PREEMPTED; or, with a grace, FAILED 143 with Slurm's preempt_time, which Slurm never
    requeues): FAILED as a preemption by Slurm, and its next attempt resumes from that checkpoint."""
    api = make_slurm_client(slurm_partition=partition, slurm_requeue=requeue, slurm_cpus_per_task=8)
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    api.template("long", spec(["--checkpoint", "--save-on-term", "--wait-file", str(gate / "go")]))
    first = api.submit("long")["id"]
    ref = api.wait_state(first, "RUNNING", "FAILED")["backend_ref"]
    wait_for(lambda: "saved checkpoint step-7" in _log_text(api, first), "its SIGTERM handler to be in place", 30)
    cluster.run("sbatch", "--parsable", f"--uid={JOB_USER}", "--chdir=/tmp", "--output=/dev/null", "-p", "urgent",
                "-N2", "--exclusive", "--wrap", "true")
    if partition == "debug" and requeue:
        wait_for(lambda: any("requeued by Slurm (preempted)" in (e.get("reason") or "") for e in api.events(first)),
                 "the requeue's event", 60)
        release_after_the_requeues_second(cluster, ref)
        (gate / "go").touch()
        done = api.wait_state(first, "SUCCEEDED", "FAILED", timeout=90)
        assert done["state"] == "SUCCEEDED" and done["attempt"] == 1 and done["backend_ref"] == ref, done
        assert "resumed from checkpoint step-9 (Slurm restart 1)" in _log_text(api, first)
        return
    ended = api.wait_state(first, "FAILED", "SUCCEEDED", timeout=90)
    error = ended["error"]
    # Where docs/slurm.md says: the job's own error names the preemption and who made it.
    assert error["cause"] == "preemption" and error["preempted_by"] == "slurm", error
    assert error["kind"] == "slurm" and error["for_job"] is None, error
    assert error["message"].startswith("preempted by its backend's own scheduler (slurm): PREEMPTED: Slurm job"), error
    if partition == "grace":   # ended FAILED 143 within its grace: Slurm's preempt_time says why
        assert error["backend_error"]["preempted_at"], error
    assert error["backend_error"]["slurm_job_id"] == ref and error["backend_error"]["preempted_by"] == "slurm"
    assert error["backend_error"]["slurm_state"] == ("FAILED" if partition == "grace" else "PREEMPTED"), error
    assert ended["retried_by"], ended   # a new attempt at once, outside any retry policy
    (gate / "go").touch()
    second = api.wait_state(ended["retried_by"], "SUCCEEDED", "FAILED", timeout=90)
    assert second["state"] == "SUCCEEDED" and second["attempt"] == 2, second
    assert "resumed from checkpoint step-9 (Slurm restart 0)" in _log_text(api, second["id"])


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_job_trainjobs_preempts_on_slurm_says_so_where_the_docs_say(make_slurm_client, db_url, cluster, tmp_path):
    """trainjobs' own queue reclaims team beta's guaranteed CPUs from team alpha's borrowed job:
    TERM to its tasks, which save a checkpoint and exit 143; the job ends FAILED as a preemption
    by trainjobs (docs/slurm.md: cause and kind in the job's error, `preempted_by` only in its
    `backend_error`) and its next attempt, once beta's job is done, resumes from that checkpoint."""
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            beta_team = get_or_create_team(session, "beta")
            session.add(TeamShare(team_id=beta_team.id, backend="slurm", nominal={"vcpu": 8}, borrowing_limit={},
                                  lending_limit={}, weight=1.0))
            session.commit()
    finally:
        engine.dispose()
    beta = bearer(make_token(db_url, "beta", "admin"))
    api = make_slurm_client(capacity={"slurm": {"vcpu": 8}}, slurm_cpus_per_task=8, preemption_grace_seconds=30.0)
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    api.template("long", spec(["--checkpoint", "--save-on-term", "--wait-file", str(gate / "go")]))
    first = api.submit("long")["id"]
    ref = api.wait_state(first, "RUNNING", "FAILED")["backend_ref"]
    wait_for(lambda: "saved checkpoint step-7" in _log_text(api, first), "its SIGTERM handler to be in place", 30)
    r = api.c.post("/v1/templates", json={"name": "short", "spec": spec(["--lines", "1"])}, headers=beta)
    assert r.status_code == 201, r.text
    r = api.c.post("/v1/jobs", json={"template": "short", "backend": "slurm"}, headers=beta)
    assert r.status_code == 201, r.text
    ended = api.wait_state(first, "FAILED", "SUCCEEDED", timeout=90)
    error = ended["error"]
    assert error["cause"] == "preemption" and error["kind"] == "reclaim" and "preempted_by" not in error, error
    assert error["backend_error"]["preempted_by"] == "trainjobs" and error["backend_error"]["slurm_job_id"] == ref
    (gate / "go").touch()
    second = api.wait_state(ended["retried_by"], "SUCCEEDED", "FAILED", timeout=90)
    assert second["state"] == "SUCCEEDED" and second["attempt"] == 2, second
    assert "resumed from checkpoint step-9 (Slurm restart 0)" in _log_text(api, second["id"])


def _log_text(api, job_id: str) -> str:
    return "\n".join(line["message"] for line in api.all_logs(job_id))


def test_preempt_sends_term_then_kill_after_the_grace(cluster, slurm_work_dir, tmp_path):
    backend = _backend(cluster, slurm_work_dir, tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    os.chmod(marks, 0o777)
    term = marks / "term"
    job = _handle(["--on-term", str(term), "--wait-file", str(marks / "never")])   # ignores SIGTERM
    ref = backend.submit(job).backend_ref
    assert ref
    f = Follower(backend, job, ref)
    run = backend.run_of(job.id)
    # RUNNING is the batch script's; its task prints hello once its SIGTERM handler is in place.
    # A TERM sent before that finds no step (or kills the task outright) on a loaded host.
    f.until(lambda: f.job.state == S.RUNNING and "hello from" in _text(run.log("workerpool0-0")),
            "the task to run with its SIGTERM handler in place")
    calls: list[list[str]] = []
    real = backend.cli.run

    def recording(tool: str, args: list[str], *, what: str) -> str:
        if tool == "scancel":
            calls.append(args)
        return real(tool, args, what=what)
    backend.cli.run = recording   # type: ignore[method-assign]
    backend.preempt(f.job, grace_seconds=1.0)
    assert calls == [["--signal=TERM", ref]]   # at once: the tasks only, never the batch script
    wait_for(lambda: term.exists() and term.read_text().startswith("TERM"), "the task to get SIGTERM", 30)
    f.until(lambda: f.job.state in TERMINAL, "the job to be killed after its grace", 60)
    # It ignored SIGTERM: only the KILL after the grace ended it.
    assert calls == [["--signal=TERM", ref], ["--signal=KILL", "--full", ref]]
    end = f.seen[-1]
    assert end.state == S.FAILED and end.error is not None
    assert end.error["cause"] == "preemption" and end.error["preempted_by"] == "trainjobs", end.error
    assert end.error["slurm_job_id"] == ref


def test_a_job_slurm_ends_preempted_is_a_preemption_by_slurm():
    """PreemptMode=CANCEL (or a job not requeueable): Slurm ends it PREEMPTED."""
    sj = poller.SlurmJob(slurm_id="7", name="trainjobs-x", state="PREEMPTED", reason="None", exit_code=None,
                         nodes=("n1",), start=None, end=None, time_limit=None, worst="PREEMPTED")
    _, error = poller.ended_error(sj)
    assert error["cause"] == "preemption" and error["preempted_by"] == "slurm" and error["slurm_state"] == "PREEMPTED"


def test_a_preemption_of_an_earlier_run_is_not_this_runs_end():
    """preempt_time before the run's start: an earlier run's preemption (Slurm requeued it); this
    run's own failure is the job's failure, not a preemption."""
    from datetime import UTC, datetime
    earlier, start = datetime(2026, 1, 1, 0, 0, tzinfo=UTC), datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    sj = poller.SlurmJob(slurm_id="7", name="trainjobs-x", state="FAILED", reason="NonZeroExitCode", exit_code=256,
                         nodes=("n1",), start=start, end=None, time_limit=None, worst="FAILED", restarts=1,
                         preempted_at=earlier)
    assert "cause" not in poller.ended_error(sj)[1]
    during = poller.ended_error(poller.SlurmJob(**{**sj.__dict__, "preempted_at": start}))[1]
    assert during["cause"] == "preemption" and during["slurm_state"] == "FAILED"


def test_the_mappings_come_from_the_environment(monkeypatch, tmp_path):
    from service.slices import Settings

    monkeypatch.setenv("TRAINJOBS_SLURM_TEAM_ACCOUNTS", '{"vision": "acct-vision"}')
    monkeypatch.setenv("TRAINJOBS_SLURM_PRIORITY_QOS", '{"urgent": "high"}')
    monkeypatch.setenv("TRAINJOBS_SLURM_REQUEUE", "true")
    cfg = slurm_config_of(Settings(database_url=f"sqlite:///{tmp_path}/x.db"))
    assert cfg.team_accounts == ACCOUNTS and cfg.priority_qos == QOS and cfg.requeue is True
    assert slurm_config_of(Settings(database_url=f"sqlite:///{tmp_path}/x.db", slurm_requeue=False)).requeue is False
