"""Attack: code in a replica that wants to outlive its job (and spy on the next one
to get its uid). It detaches every way it can (double fork, setsid, a cleared
environment, a new name) and goes on running. Whatever ends the job (its end, a
cancel, its stall timeout, a kill -9 of the service and a restart), every process
of the job is gone within seconds: its PID namespace dies with its init. Its uid
is not given to a job while any of it lives (uid locks, two deployments)."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal

import httpx
import psutil
import pytest

from service.backends.local.sandbox import UID_LOCK_DIR, UidPool
from tests.backends.localkit import Api, ServiceProcess, assert_no_processes, read_json, settings_for
from tests.conftest import ONE_DATABASE, bearer
from tests.waiting import wait_for

pytestmark = [ONE_DATABASE, pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes need the tests to run as root")]

# Double fork, setsid, exec with an empty environment under another name: no marker, no parent.
# `detached` is printed once the escapee has exec'd: the pipe's write end closes on exec
# (os.pipe's ends are close-on-exec), so the read returns then, not when the fork returned.
ESCAPE = r'''
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve("/bin/sleep", ["escaped-sleeper", "600"], {})
    os._exit(0)
os.close(w)
os.wait()
os.read(r, 1)
print("detached", flush=True)
mode = sys.argv[1]
if mode == "hang":
    time.sleep(600)
else:
    # Alive until the test has seen the escapee (its gate, in the job's working directory): an
    # end or a stall before that would end the job before there is anything to check.
    while not os.path.exists("go"):
        print("alive", flush=True)
        time.sleep(0.2)
    if mode == "silent":
        time.sleep(600)
'''


def escapees(uid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["uids", "status"]):
        try:
            if p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, AttributeError):
            continue
    return out


def _holds_lock(pid: int, uid: int) -> bool:
    lock = str(UID_LOCK_DIR / str(uid))
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == lock:
                return True
        except OSError:
            continue
    return False


def _escaping_job(api: Api, mode: str, **scheduling) -> tuple[dict, int]:
    spec = {"container": {"image_uri": "local", "command": ["python", "-c", ESCAPE, mode]}}
    if scheduling:
        spec["scheduling"] = scheduling
    api.template(f"escape-{mode}", spec)
    job = api.submit(f"escape-{mode}")
    wait_for(lambda: any(ln["message"] == "detached" for ln in api.all_logs(job["id"])), "the escape")
    uid = read_json(api.run_path(job["id"]) / "state.json")["uid"]
    assert uid and any("escaped-sleeper" in p.cmdline() for p in escapees(uid)), "the escapee must exist first"
    return job, uid


@pytest.mark.parametrize("ending", ["end", "cancel", "stall"])
def test_nothing_of_a_job_outlives_it(make_client, work_dir, ending):
    api = make_client(local_cancel_grace_seconds=1.0)
    if ending == "end":
        job, uid = _escaping_job(api, "exit")
        (api.run_path(job["id"]) / "work" / "go").touch()
        final = api.wait_state(job["id"], "SUCCEEDED", "FAILED")["state"]
        assert final == "SUCCEEDED"
    elif ending == "cancel":
        job, uid = _escaping_job(api, "hang")
        assert api.c.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
        assert api.wait_state(job["id"], "CANCELLED", "FAILED", "SUCCEEDED")["state"] == "CANCELLED"
    else:
        job, uid = _escaping_job(api, "silent", stall_timeout_seconds=2)
        (api.run_path(job["id"]) / "work" / "go").touch()
        assert api.wait_state(job["id"], "FAILED", "SUCCEEDED")["state"] == "FAILED"
    # Within seconds of its end (a cancel is reported only once nothing is left).
    if ending == "cancel":
        assert escapees(uid) == []
    wait_for(lambda: escapees(uid) == [], "every process of the job's uid to be gone", timeout=5)
    assert_no_processes(work_dir, job["id"], timeout=5)


def test_nothing_survives_a_service_restart(db_url, work_dir, token, tmp_path):
    settings = settings_for(db_url, work_dir, local_cancel_grace_seconds=1.0)
    first = ServiceProcess(settings, tmp_path / "service-1.log")
    second = None
    try:
        first.wait_ready()
        api = Api(httpx.Client(base_url=first.url, headers=bearer(token), timeout=30))
        job, uid = _escaping_job(api, "hang")
        first.kill9()
        assert any("escaped-sleeper" in p.cmdline() for p in escapees(uid))  # the job goes on meanwhile
        second = ServiceProcess(settings, tmp_path / "service-2.log")
        second.wait_ready()
        api = Api(httpx.Client(base_url=second.url, headers=bearer(token), timeout=30))
        # Followed again: the job may still have been PENDING in the database when the first
        # service died (its logs come from the replica's files, ahead of the state), so wait for
        # the second one to judge the run it finds, and check that it is that run, not a new one.
        assert api.wait_state(job["id"], "RUNNING", "FAILED", "SUCCEEDED", "CANCELLED")["state"] == "RUNNING"
        assert read_json(api.run_path(job["id"]) / "state.json")["uid"] == uid
        assert any("escaped-sleeper" in p.cmdline() for p in escapees(uid))
        # ...and the new service holds the uid's lock again (with the job's init), so the uid
        # stays taken until the job's files are given back, not only until its processes die.
        wait_for(lambda: _holds_lock(second.proc.pid, uid), "the restarted service to hold the uid's lock")
        assert api.c.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
        assert api.wait_state(job["id"], "CANCELLED", "FAILED", "SUCCEEDED")["state"] == "CANCELLED"
        assert escapees(uid) == []
        wait_for(lambda: not _holds_lock(second.proc.pid, uid), "the uid's lock to be let go")
        assert_no_processes(work_dir, job["id"], timeout=5)
    finally:
        for service in (first, second):
            if service is not None:
                service.stop()


def test_a_uid_is_never_given_while_held_or_in_use(tmp_path):
    base = 300_900 + (os.getpid() % 50)  # inside this engineer's range, apart from the jobs' uids
    locks = tmp_path / "locks"
    one, other = UidPool(base, 3, locks), UidPool(base, 3, locks)  # two deployments, one host
    uid_a, fd_a = one.acquire()
    uid_b, fd_b = other.acquire()
    assert uid_a != uid_b  # the other deployment skips a uid this one holds
    # A process (of anyone) still running as a uid keeps it from being given.
    pid = os.fork()
    if pid == 0:
        os.setuid(base + 2)
        signal.pause()
        os._exit(0)
    try:
        wait_for(lambda: psutil.Process(pid).uids().real == base + 2, "the squatter")
        with pytest.raises(OSError, match="in use"):
            one.acquire()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd_a)
    uid_c, fd_c = other.acquire()
    assert uid_c in (uid_a, base + 2) and uid_c != uid_b
    os.close(fd_b)
    os.close(fd_c)


BOMB = r'''
import os, signal, sys, time
kids = []
for _ in range(500):               # bounded: the limit stops it long before
    try:
        pid = os.fork()
    except OSError as e:
        print("FORK REFUSED", len(kids), e.errno, flush=True)
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    kids.append(pid)
else:
    print("FORK NEVER REFUSED", len(kids), flush=True)
'''


@pytest.mark.parametrize("sandbox", ["namespaces", "none"])
def test_a_fork_bomb_stops_at_the_jobs_process_limit_and_is_cleaned_up(make_client, work_dir, sandbox):
    api = make_client(local_max_processes_per_job=40, local_sandbox=sandbox)
    api.template("bomb", {"container": {"image_uri": "local", "command": ["python", "-c", BOMB]}})
    job = api.submit("bomb")
    done = api.wait_state(job["id"], "SUCCEEDED", "FAILED")
    assert done["state"] == "SUCCEEDED", done["error"]
    [line] = [ln["message"] for ln in api.all_logs(job["id"]) if "FORK" in ln["message"]]
    _, verdict, count, *_ = line.split()
    assert verdict == "REFUSED" and 0 < int(count) < 40, line
    state = read_json(api.run_path(job["id"]) / "state.json")
    # Its children, orphaned when it exited (and outside any PID namespace when unsandboxed),
    # are gone with the job's cgroup.
    wait_for(lambda: escapees(state["uid"]) == [], "the bomb's children to be gone", timeout=5)
    assert state["cgroup"]
    wait_for(lambda: not os.path.exists(state["cgroup"]), "the job's cgroup to be removed", timeout=5)


GATED = r'''
import os, sys, time
print("waiting", flush=True)
for _ in range(6000):               # bounded: the test opens the gate long before
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
'''


def _uid_free(uid: int) -> bool:
    fd = os.open(UID_LOCK_DIR / str(uid), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_sandbox_ends_by_itself_when_its_service_is_gone_for_good(db_url, work_dir, token, tmp_path):
    """A service killed for good mid-job (kill -9, never started again): the sandbox of a job
    whose replicas then end goes within TRAINJOBS_LOCAL_SANDBOX_IDLE_SECONDS, the sandbox of a
    job whose run folder is deleted within a second or so; each lets its uid and cgroup go.
    About 15 s (a service start)."""
    settings = settings_for(db_url, work_dir, local_sandbox_idle_seconds=1.0)
    service = ServiceProcess(settings, tmp_path / "service.log")
    gate = tmp_path / "gate"
    try:
        service.wait_ready()
        api = Api(httpx.Client(base_url=service.url, headers=bearer(token), timeout=30))
        api.template("gated", {"container": {"image_uri": "local", "command": ["python", "-c", GATED, str(gate)]}})
        jobs = [api.submit("gated") for _ in range(2)]
        for job in jobs:
            wait_for(lambda job=job: any(ln["message"] == "waiting" for ln in api.all_logs(job["id"])), "the job")
        runs = [api.run_path(job["id"]) for job in jobs]
        states = [read_json(run / "state.json") for run in runs]
    finally:
        service.kill9()
    holders = [psutil.Process(s["holder"]["pid"]) for s in states]
    gate.touch()  # the first job's replica ends, with no service to notice
    shutil.rmtree(runs[1])  # the second job's run folder is deleted under it, its replica still running
    for holder, state in zip(holders, states, strict=True):
        wait_for(lambda h=holder: not h.is_running() or h.status() == psutil.STATUS_ZOMBIE,
                 f"the sandbox of {state['job_id']} to end by itself", timeout=30)
        wait_for(lambda s=state: _uid_free(s["uid"]) and not os.path.exists(s["cgroup"]),
                 "its uid and cgroup to be let go", timeout=30)
        assert escapees(state["uid"]) == []
    assert read_json(runs[0] / "replicas" / "workerpool0-0.exit")["exit_code"] == 0
    service.stop()
