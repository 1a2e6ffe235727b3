"""Local backend benchmark: a real service process (uvicorn, SQLite, local
backend) and real replica processes, measured from a client over HTTP.

  start     POST /v1/jobs -> every replica process started (2 replicas; each
            replica program records time.time() as its first statement)
  failure   a replica's exit 1 -> GET /v1/jobs/{id} says FAILED (client polls every 10 ms)
  latency   a line printed by a replica -> its SSE event at the client (the line
            carries time.time() at print; one line each 20 ms)
  throughput  SSE lines/s: live (the job prints as fast as it can while the client
            follows) and catch-up (following a finished job's log from the start)

Run: .venv/bin/python bench/local.py [--runs 10] [--lines 200000]"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx
from httpx_sse import connect_sse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402

PROGRAM = textwrap.dedent('''
    import os, sys, time
    t0 = time.time()
    args = dict(a.split("=", 1) for a in " ".join(sys.argv[1:]).split())
    task = os.environ["TRAINJOBS_LOCAL_REPLICA"].split("/", 1)[1]
    if "started" in args:
        with open(os.path.join(args["started"], task), "w") as f:
            f.write(repr(t0))
    if "gate" in args:
        while not os.path.exists(args["gate"]):
            time.sleep(0.005)
    n, interval = int(args.get("lines", 0)), float(args.get("interval", 0))
    for i in range(n):
        print(f"{time.time()!r} line {i}", flush=bool(interval))
        if interval:
            time.sleep(interval)
    sys.stdout.flush()
    code = int(args.get("exit", 0))
    if "exit_mark" in args and code:
        with open(args["exit_mark"], "w") as f:
            f.write(repr(time.time()))
    if "sleep" in args:
        time.sleep(float(args["sleep"]))
    sys.exit(code)
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(pred, what: str, timeout: float = 120, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out waiting for {what}")
        time.sleep(interval)


class Bench:
    def __init__(self, tmp: Path, sandbox: str = "namespaces"):
        self.tmp = tmp
        self.program = tmp / "replica.py"
        self.program.write_text(PROGRAM)
        db = f"sqlite:///{tmp / 'bench.db'}"
        migrate.upgrade(db)
        engine = make_engine(db)
        with make_session_factory(engine)() as session:
            _, token = create_token(session, get_or_create_team(session, "bench"), "bench", "admin", "bench")
            session.commit()
        engine.dispose()
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        env.update(TRAINJOBS_DATABASE_URL=db, TRAINJOBS_LOCAL_WORK_DIR=str(tmp / "runs"),
                   TRAINJOBS_LOCAL_MAX_RUNNING_JOBS="4", TRAINJOBS_LOCAL_CANCEL_GRACE_SECONDS="2",
                   TRAINJOBS_LOG_LEVEL="WARNING", TRAINJOBS_LOCAL_SANDBOX=sandbox,
                   # The replicas' marks and gates live here: visible (and writable) in their sandbox.
                   TRAINJOBS_LOCAL_SANDBOX_SHARED_DIRS=json.dumps([str(tmp)]))
        os.chmod(tmp, 0o711)  # replicas run as uids of their own when this runs as root
        self.log = open(tmp / "service.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory",
                                      "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                                      "--no-access-log"], env=env, cwd=ROOT, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                              headers={"Authorization": f"Bearer {token}"})

        def up():
            try:
                return self.c.get("/healthz").status_code == 200
            except httpx.HTTPError:
                return False
        wait(up, "the service", 120, 0.1)
        spec = {"container": {"image_uri": "bench:1", "command": ["python", str(self.program)]},
                "chief": {"container": {"args": ["${chief}"]}},
                "workers": {"container": {"args": ["${worker}"]}}}
        params = [{"name": "chief", "type": "string"}, {"name": "worker", "type": "string"}]
        r = self.c.post("/v1/templates", json={"name": "bench", "spec": spec, "parameters": params})
        assert r.status_code == 201, r.text
        wait(lambda: self.c.get("/v1/templates/bench").status_code == 200, "the template")

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()

    def submit(self, chief: str, worker: str) -> tuple[str, float]:
        """Each role's flags are one string, e.g. "started=/x gate=/y"."""
        t0 = time.time()
        r = self.c.post("/v1/jobs", json={"template": "bench", "parameters": {"chief": chief, "worker": worker}})
        assert r.status_code == 201, r.text
        return r.json()["id"], t0

    def state(self, job_id: str) -> str:
        return self.c.get(f"/v1/jobs/{job_id}").json()["state"]

    def wait_final(self, job_id: str) -> str:
        return wait(lambda: (s := self.state(job_id)) in ("SUCCEEDED", "FAILED", "CANCELLED") and s,
                    f"job {job_id} to end", interval=0.05)

    def start_latency(self, runs: int) -> list[float]:
        out = []
        for i in range(runs):
            started, gate = self.tmp / f"started{i}", self.tmp / f"gate{i}"
            started.mkdir()
            os.chmod(started, 0o777)
            flags = f"started={started} gate={gate}"
            job_id, t0 = self.submit(flags, flags)

            def both():
                marks = [f.read_text() for f in started.iterdir()]
                return len(marks) == 2 and all(marks) and marks
            out.append(max(float(m) for m in wait(both, "2 replicas to start")) - t0)
            gate.touch()
            self.wait_final(job_id)
        return out

    def failure_latency(self, runs: int) -> list[float]:
        out = []
        for i in range(runs):
            marks = self.tmp / "marks"  # the worker (its own uid as root) writes its mark here
            marks.mkdir(exist_ok=True)
            os.chmod(marks, 0o777)
            mark = marks / f"exit{i}"
            # The worker exits 1 as soon as it runs; the chief would sleep ten minutes.
            job_id, _ = self.submit("sleep=600", f"exit=1 exit_mark={mark}")
            seen = wait(lambda: self.state(job_id) == "FAILED" and time.time(), "FAILED", interval=0.01)
            out.append(seen - float(mark.read_text()))
        return out

    def delivery_latency(self, lines: int) -> list[float]:
        """The chief prints a line with time.time() every 20 ms; the client follows."""
        job_id, _ = self.submit(f"lines={lines} interval=0.02", "exit=0")
        lat = []
        with connect_sse(self.c, "GET", f"/v1/jobs/{job_id}/logs") as source:
            for sse in source.iter_sse():
                if sse.event == "end":
                    break
                now = time.time()
                try:
                    lat.append(now - float(json.loads(sse.data)["message"].split(" ", 1)[0]))
                except ValueError:
                    continue  # not a timestamped line
        return lat

    def follow_throughput(self, job_id: str) -> tuple[int, float]:
        n, first, last = 0, None, None
        with connect_sse(self.c, "GET", f"/v1/jobs/{job_id}/logs", params={"limit": 5000}) as source:
            for sse in source.iter_sse():
                if sse.event == "end":
                    break
                n += 1
                last = time.perf_counter()
                if first is None:
                    first = last
        return n, (last - first) if first is not None and last > first else float("nan")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--latency-lines", type=int, default=200)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--sandbox", choices=["namespaces", "none"], default="namespaces",
                    help="TRAINJOBS_LOCAL_SANDBOX of the service (as root; not root: always unsandboxed)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        b = Bench(Path(tmp), args.sandbox)
        try:
            start = b.start_latency(args.runs)
            fail = b.failure_latency(args.runs)
            lat = b.delivery_latency(args.latency_lines)
            job_id, _ = b.submit(f"lines={args.lines}", "exit=0")
            live_n, live_s = b.follow_throughput(job_id)
            b.wait_final(job_id)
            catch_n, catch_s = b.follow_throughput(job_id)
        finally:
            b.close()
    rows = [
        ("POST /v1/jobs -> every replica started", "<= 1 s", f"{pct(start, 50):.3f} s", f"{max(start):.3f} s",
         f"{len(start)} jobs x 2 replicas"),
        ("replica exits 1 -> job FAILED", "<= 2 s", f"{pct(fail, 50):.3f} s", f"{max(fail):.3f} s",
         f"{len(fail)} jobs"),
        ("SSE delivery latency", "p50 <= 250 ms", f"{pct(lat, 50) * 1000:.0f} ms",
         f"p95 {pct(lat, 95) * 1000:.0f} ms", f"{len(lat)} lines"),
        ("SSE throughput, live", ">= 5,000 lines/s", f"{live_n / live_s:,.0f} lines/s", "",
         f"{live_n:,} lines in {live_s:.2f} s"),
        ("SSE throughput, catch-up", ">= 5,000 lines/s", f"{catch_n / catch_s:,.0f} lines/s", "",
         f"{catch_n:,} lines in {catch_s:.2f} s"),
    ]
    head = ("measure", "target", "p50 / value", "max", "sample")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False))  # noqa: E731
    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


if __name__ == "__main__":
    main()
