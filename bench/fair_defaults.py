"""bench/fairness.py (c) and (d): the queue's fairness at its defaults, on a real service (issue 47).

Each run starts its own service (uvicorn, a fresh SQLite database, the local backend, every replica
in its sandbox when run as root) from the code of --root, and measures from outside, through the
API: each job's created_at and started_at (the job view). Every job is one replica that sleeps
(`python -c "import time, sys; time.sleep(...)"`), so the figures are the queue's, not a trainer's.

(c) The defaults: no capacity set, TRAINJOBS_LOCAL_MAX_RUNNING_JOBS at its default (2) and at 1.
    Team A queues 12 jobs of 4 s; once A's jobs hold every slot, team B queues 1. Run with B named so it sorts after A
    (A `teama`, B `teamb`) and before it (A `teamb`, B `teama`). Figures: B's wait (started_at -
    created_at) and how many of A's jobs started before B's. Goal: B starts with the next free slot,
    at most one of A's jobs (4 s) plus a controller pass or two.
(d) A team reclaiming a launch slot: TRAINJOBS_CAPACITY {"local": {"core": 4}}, launch slots at their
    default (2), shares (operator API) A and B a nominal core each. A submits 3 jobs of 30 s (two
    take both slots: one core inside A's nominal quota, one borrowed), then B submits 1 job of 4 s.
    Figures: B's wait, and the preemptions of A's jobs (goal: exactly one, error.cause "preemption",
    kind "reclaim"; B's wait at most a pass or two plus TRAINJOBS_PREEMPTION_GRACE_SECONDS, set to 2).

After the figures are read every job still going is cancelled and the service stopped."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import httpx

from bench.local import free_port, wait

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED")
UID_BASE, UID_COUNT = 960_000, 1000   # apart from the other benches' and the tests' replica uids
GRACE_S = 2                            # TRAINJOBS_PREEMPTION_GRACE_SECONDS in (d)

# Run in a process of the --root tree: its own migrations (the code before issue 47 has one fewer)
# and its own token code make the database that tree's service expects.
SETUP = """
import json, sys
from service.auth.service import create_token, get_or_create_team
from service.persistence import migrate
from service.persistence.session import make_engine, make_session_factory
import service
db, teams = sys.argv[1], sys.argv[2:]
migrate.upgrade(db)
engine = make_engine(db)
out = {"service_code": service.__file__}
with make_session_factory(engine)() as session:
    for team in teams:
        out[team] = create_token(session, get_or_create_team(session, team), "bench", "admin", "bench")[1]
    out["ops"] = create_token(session, get_or_create_team(session, "ops"), "ops", "operator", "bench")[1]
    session.commit()
engine.dispose()
print(json.dumps(out))
"""


def _sleeper(seconds: float) -> dict:
    return {"container": {"image_uri": "bench:1",
                          "command": ["python", "-c", f"import time; time.sleep({seconds})"]},
            "chief": {"replica_count": 1}, "scheduling": {"timeout_seconds": 600}}


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def _ok(r: httpx.Response) -> dict:
    if r.status_code >= 300:
        raise SystemExit(f"bench: {r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
    return r.json() if r.content else {}


class Service:
    """A `serve` of the --root tree's code on a fresh database, with one admin token per team."""

    def __init__(self, root: Path, teams: list[str], env_extra: dict[str, str]):
        self.root, self.teams, self.env_extra = root, teams, env_extra

    def __enter__(self) -> Service:
        self._tmp = tempfile.TemporaryDirectory(prefix="trainjobs-fair-")
        tmp = Path(self._tmp.name)
        os.chmod(tmp, 0o711)   # replicas run as uids of their own when this runs as root
        db = f"sqlite:///{tmp / 'bench.db'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        env["PYTHONPATH"] = str(self.root)
        out = subprocess.run([sys.executable, "-c", SETUP, db, *self.teams], cwd=self.root, env=env,
                             capture_output=True, text=True, timeout=300)
        if out.returncode:
            raise SystemExit(f"bench: setting up the database failed: {out.stderr[-2000:]}")
        tokens = json.loads(out.stdout.strip().splitlines()[-1])
        self.service_code = str(Path(tokens.pop("service_code")).parent)
        env.update(TRAINJOBS_DATABASE_URL=db, TRAINJOBS_LOCAL_WORK_DIR=str(tmp / "runs"),
                   TRAINJOBS_LOG_LEVEL="WARNING", TRAINJOBS_SEED_DEMO_TEMPLATE="false",
                   TRAINJOBS_LOCAL_CANCEL_GRACE_SECONDS="2",
                   TRAINJOBS_LOCAL_REPLICA_UID_BASE=str(UID_BASE), TRAINJOBS_LOCAL_REPLICA_UID_COUNT=str(UID_COUNT),
                   **self.env_extra)
        self._log = open(tmp / "service.log", "wb")
        port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory",
                                      "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                                      "--no-access-log"], env=env, cwd=self.root, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        self.c = {t: httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {tok}"})
                  for t, tok in tokens.items()}
        wait(self._up, "the service", 120, 0.1)
        return self

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise SystemExit(f"bench: the service exited ({self.proc.returncode}); see its log")
        try:
            return self.c["ops"].get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def template(self, team: str, name: str, seconds: float) -> None:
        _ok(self.c[team].post("/v1/templates", json={"name": name, "spec": _sleeper(seconds)}))
        # The template's row is committed after the answer: wait until a submit would see it.
        wait(lambda: self.c[team].get(f"/v1/templates/{name}").status_code == 200, f"template {name}", 30, 0.05)

    def submit(self, team: str, template: str) -> str:
        return _ok(self.c[team].post("/v1/jobs", json={"template": template, "backend": "local"}))["id"]

    def job(self, team: str, job_id: str) -> dict:
        r = self.c[team].get(f"/v1/jobs/{job_id}")
        return _ok(r) if r.status_code != 404 else {}   # a job a moment old may not be committed yet

    def finish(self, jobs: dict[str, list[str]]) -> None:
        """Cancel every job still going (the attempts of preempted ones too) and wait until all end."""
        def going() -> list[tuple[str, str]]:
            out = []
            for team, ids in jobs.items():
                for job_id in ids:
                    view = self.job(team, job_id)
                    for a in view.get("attempts") or [{"id": job_id, "state": view.get("state")}]:
                        if a["state"] not in FINAL:
                            out.append((team, a["id"]))
            return out
        for team, job_id in going():
            self.c[team].post(f"/v1/jobs/{job_id}/cancel")
        wait(lambda: not going(), "every job to end", 120, 0.5)

    def __exit__(self, *exc) -> None:
        try:
            self.proc.terminate()
            self.proc.wait(60)
        finally:
            self._log.close()
            for c in self.c.values():
                c.close()
            self._tmp.cleanup()


def _started(svc: Service, team: str, job_id: str) -> dict | None:
    view = svc.job(team, job_id)
    return view if view.get("started_at") else None


def defaults(root: Path, slots: int | None, late: str, early: str, jobs: int = 12, seconds: float = 4) -> dict:
    """(c): `early` queues `jobs` jobs of `seconds`, then `late` queues 1; slots None: the default."""
    env = {} if slots is None else {"TRAINJOBS_LOCAL_MAX_RUNNING_JOBS": str(slots)}
    load = os.getloadavg()[0]
    with Service(root, [early, late], env) as svc:
        for team in (early, late):
            svc.template(team, "sleep", seconds)
        a_ids = [svc.submit(early, "sleep") for _ in range(jobs)]
        # B comes once A holds every slot, so its wait is for the next free slot (submitted at once,
        # it sometimes beat A's second launch to a pass: 0.3 s, which measures nothing).
        held = min(jobs, slots or 2)
        wait(lambda: sum(1 for i in a_ids if _started(svc, early, i)) >= held, f"{early} to hold every slot", 120, 0.1)
        b_id = svc.submit(late, "sleep")
        b = wait(lambda: _started(svc, late, b_id), f"{late}'s job to start", 300, 0.1)
        b_start = _ts(b["started_at"])
        a_views = [svc.job(early, i) for i in a_ids]
        before = sum(1 for v in a_views if v.get("started_at") and _ts(v["started_at"]) < b_start)
        svc.finish({early: a_ids, late: [b_id]})
        code = svc.service_code
    return {"slots": slots or 2, "slots_setting": "default" if slots is None else str(slots),
            "early": early, "late": late, "late_wait_s": round(b_start - _ts(b["created_at"]), 1),
            "early_started_before": before, "early_jobs": jobs, "job_s": seconds,
            "load_avg_1m": round(load, 1), "service_code": code}


def reclaim(root: Path, long_s: float = 30, short_s: float = 4) -> dict:
    """(d): capacity 4 cores, 2 slots (default); A (nominal 1 core) fills both slots, then B (nominal 1) submits 1."""
    env = {"TRAINJOBS_CAPACITY": json.dumps({"local": {"core": 4}}),
           "TRAINJOBS_PREEMPTION_GRACE_SECONDS": str(GRACE_S)}
    load = os.getloadavg()[0]
    with Service(root, ["teama", "teamb"], env) as svc:
        for team in ("teama", "teamb"):
            _ok(svc.c["ops"].put(f"/v1/teams/{team}/shares/local", json={"nominal": {"core": 1}, "weight": 1.0}))
        svc.template("teama", "long", long_s)
        svc.template("teamb", "short", short_s)
        a_ids = [svc.submit("teama", "long") for _ in range(3)]
        wait(lambda: sum(1 for i in a_ids if _started(svc, "teama", i)) >= 2, "A's jobs to take both slots", 120, 0.1)
        b_id = svc.submit("teamb", "short")
        b = wait(lambda: _started(svc, "teamb", b_id), "B's job to start", 300, 0.1)
        preemptions = []
        for i in a_ids:
            for p in svc.job("teama", i).get("preemptions") or []:
                attempt = svc.job("teama", p["attempt"])
                preemptions.append({"kind": p.get("kind"), "cause": (attempt.get("error") or {}).get("cause"),
                                    "why": p.get("why", "")})
        svc.finish({"teama": a_ids, "teamb": [b_id]})
        code = svc.service_code
    return {"late_wait_s": round(_ts(b["started_at"]) - _ts(b["created_at"]), 1), "grace_s": GRACE_S,
            "preempted": len(preemptions), "preemptions": preemptions, "long_job_s": long_s,
            "load_avg_1m": round(load, 1), "service_code": code}
