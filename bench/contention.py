"""bench/fairness.py (b): three teams contend for 4 cores of the local backend, on a real service.

A service process (uvicorn, SQLite, the local backend, replicas in their sandboxes) with a
capacity of 4 cores (TRAINJOBS_CAPACITY). Team shares: A and B a nominal quota of 1 core each,
C none; a priority class `urgent` (value 100) that may preempt. Every job is the packaged
trainer (tiny CNN on synthetic data, one replica: one core) saving on SIGTERM every few steps.

  t = 0     team A submits --flood jobs (they take all 4 cores: 1 nominal, 3 borrowed)
  t = 40 s  team B submits 5 (its first is inside its nominal quota: A's borrowed jobs are reclaimed)
  t = 60 s  team C submits one `urgent` job (it preempts a borrowed job)

Measured from outside: each job's submit and start (the job view's started_at), each preempted
attempt and the step its next attempt resumed at (progress.resumed_at_step), and the most cores
ever in use, counted as distinct replica uids among /proc's processes every 0.1 s (each job here
is one replica under a uid of its own)."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.local import free_port, wait  # noqa: E402  (the same helpers as the local benchmark)
from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402

UID_BASE, UID_COUNT = 950_000, 1000
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED")
STEPS = 300         # per epoch; 2 epochs: about 20 s a job with 4 running on this machine


def spec(priority_class: str | None = None) -> dict:
    out = {"distribution": "multi_worker_mirrored",
           "container": {"image_uri": "trainjobs-trainer:latest", "command": ["python", "-m", "trainer.task"],
                         "args": ["--dataset=synthetic", "--model=tiny_cnn", "--image-size=32", "--epochs=2",
                                  f"--steps-per-epoch={STEPS}", "--batch-size=16", "--preemption-check-steps=2"]},
           "chief": {"machine_type": "n1-standard-4", "replica_count": 1},
           "scheduling": {"timeout_seconds": 900}}
    if priority_class:
        out["priority_class"] = priority_class
    return out


class CoreCounter(threading.Thread):
    """The most replicas ever running at once: distinct uids of the replica range in /proc."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.most = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            uids = set()
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("Uid:"):
                                uid = int(line.split()[1])
                                if UID_BASE <= uid < UID_BASE + UID_COUNT:
                                    uids.add(uid)
                                break
                except OSError:
                    continue
            self.most = max(self.most, len(uids))


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def contend(flood: int = 30) -> dict:
    with tempfile.TemporaryDirectory(prefix="trainjobs-contention-") as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o711)
        db = f"sqlite:///{tmp / 'bench.db'}"
        migrate.upgrade(db)
        engine = make_engine(db)
        tokens = {}
        with make_session_factory(engine)() as session:
            for team in ("a", "b", "c"):
                tokens[team] = create_token(session, get_or_create_team(session, team), "bench", "admin", "bench")[1]
            tokens["operator"] = create_token(session, get_or_create_team(session, "ops"), "ops", "operator",
                                              "bench")[1]
            session.commit()
        engine.dispose()
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        env.update(TRAINJOBS_DATABASE_URL=db, TRAINJOBS_LOCAL_WORK_DIR=str(tmp / "runs"),
                   TRAINJOBS_LOCAL_MAX_RUNNING_JOBS="64", TRAINJOBS_LOG_LEVEL="WARNING",
                   TRAINJOBS_CAPACITY=json.dumps({"local": {"core": 4}}),
                   TRAINJOBS_PREEMPTION_GRACE_SECONDS="30", TRAINJOBS_SEED_DEMO_TEMPLATE="false",
                   TRAINJOBS_LOCAL_REPLICA_UID_BASE=str(UID_BASE), TRAINJOBS_LOCAL_REPLICA_UID_COUNT=str(UID_COUNT))
        log = open(tmp / "service.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory", "--host",
                                 "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"],
                                env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        clients = {t: httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {tok}"})
                   for t, tok in tokens.items()}
        counter = CoreCounter()
        try:
            wait(lambda: _up(clients["a"]), "the service", 120)
            return _run(clients, flood, counter)
        finally:
            counter.stop.set()
            proc.terminate()
            proc.wait(60)
            log.close()
            for c in clients.values():
                c.close()


def _up(c: httpx.Client) -> bool:
    try:
        return c.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def _ok(r: httpx.Response) -> dict:
    if r.status_code >= 300:
        raise SystemExit(f"bench: {r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    return r.json() if r.content else {}


def _run(clients: dict[str, httpx.Client], flood: int, counter: CoreCounter) -> dict:
    ops = clients["operator"]
    _ok(ops.put("/v1/priority-classes/urgent", json={"value": 100, "preempts": True, "teams": ["c"],
                                                    "description": "bench: may preempt"}))
    for team, nominal in (("a", {"core": 1}), ("b", {"core": 1}), ("c", {})):
        _ok(ops.put(f"/v1/teams/{team}/shares/local", json={"nominal": nominal, "weight": 1.0}))
    for team in ("a", "b", "c"):
        _ok(clients[team].post("/v1/templates", json={"name": "train", "spec": spec("urgent" if team == "c" else None)}))
    counter.start()
    t0 = time.time()
    submitted: dict[str, list[tuple[str, float]]] = {"a": [], "b": [], "c": []}

    def submit(team: str, n: int) -> None:
        for _ in range(n):
            at = time.time()
            job = _ok(clients[team].post("/v1/jobs", json={"template": "train"}))
            submitted[team].append((job["id"], at))

    submit("a", flood)
    time.sleep(max(0.0, t0 + 40 - time.time()))   # the scenario's clock, not a wait for a result
    submit("b", 5)
    time.sleep(max(0.0, t0 + 60 - time.time()))
    submit("c", 1)

    def chain(team: str, job_id: str) -> list[dict]:
        first = _ok(clients[team].get(f"/v1/jobs/{job_id}"))
        ids = [a["id"] for a in first.get("attempts") or []] or [job_id]
        return [first if i == job_id else _ok(clients[team].get(f"/v1/jobs/{i}")) for i in ids]

    def all_final() -> bool:
        for team, jobs in submitted.items():
            for job_id, _ in jobs:
                last = chain(team, job_id)[-1]
                if last["state"] not in FINAL:
                    return False
        return True
    wait(all_final, "every job to end", timeout=60 * 60, interval=2.0)
    counter.stop.set()
    return _figures(submitted, {t: {j: chain(t, j) for j, _ in js} for t, js in submitted.items()}, counter.most)


def _figures(submitted, chains, most: int) -> dict:
    waits: dict[str, list[float]] = {}
    firsts: dict[str, float] = {}
    preemptions, resumed, lost, succeeded = 0, [], 0, True
    whys: list[str] = []
    for team, jobs in submitted.items():
        for job_id, at in jobs:
            attempts = chains[team][job_id]
            start = _ts(attempts[0].get("started_at"))
            if start is not None:
                waits.setdefault(team, []).append(start - at)
                firsts[team] = min(firsts.get(team, float("inf")), start - at)
            last = attempts[-1]
            lost += last["state"] not in FINAL
            succeeded &= last["state"] == "SUCCEEDED"
            for before, after in zip(attempts, attempts[1:], strict=False):
                if (before.get("error") or {}).get("cause") == "preemption":
                    preemptions += 1
                    whys.append(f"team {team}: {(before.get('error') or {}).get('message', '')}")
                    # None: it was stopped before its first checkpoint (still starting), so it
                    # started again from step 0.
                    resumed.append((after.get("progress") or {}).get("resumed_at_step"))
    for why in whys:
        print(f"(b) preempted: {why}")
    for team in ("a", "b", "c"):
        w = sorted(waits.get(team, []))
        if w:
            p90 = w[min(len(w) - 1, int(0.9 * len(w)))]
            print(f"(b) team {team}: {len(w)} jobs, wait p50 {statistics.median(w):.1f} s, p90 {p90:.1f} s")
    print(f"(b) B's first start {firsts.get('b', float('nan')):.1f} s after its submit, C's "
          f"{firsts.get('c', float('nan')):.1f} s; {preemptions} preemptions, resumed at steps {resumed}; "
          f"at most {most} cores in use of 4; {lost} lost; all succeeded: {succeeded}")
    return {"b_first_start_s": round(firsts.get("b", -1), 1), "c_first_start_s": round(firsts.get("c", -1), 1),
            "preemptions": preemptions, "resumed_steps": resumed, "max_cores_in_use": most, "capacity_cores": 4,
            "lost": lost, "all_final_succeeded": succeeded,
            "wait_p50_s": {t: round(statistics.median(w), 1) for t, w in waits.items()}}
