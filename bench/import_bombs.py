"""Import bombs against a real `uvicorn service.app:create_app` process (SQLite).

Each bomb is POSTed to /v1/templates:import (as an admin) from one thread, again and
again for a few seconds, while another thread GETs /healthz every 20 ms. Prints per
bomb: its size, the answer and its latency (p50 / max), the API process's CPU per import
(ms; its import workers not counted), and /healthz p50 / p99 / max meanwhile. Goal
(issue 22): every bomb answers 4xx within 2 s, /healthz under 100 ms.

    .venv/bin/python bench/import_bombs.py [--seconds 5]
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402


def merge_bomb(levels: int) -> str:
    return "a0: &a0 {k: v}\n" + "".join(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}\n" for i in range(1, levels + 1))


def laughs(levels: int, fanout: int) -> str:
    lines = ['l0: &l0 "ha"']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fanout)}]")
    return "\n".join(lines) + "\n"


BOMBS = {
    # The control: a small valid config (200 answers), for /healthz's latency on this machine without bombs.
    "control: a valid config (no bomb)": ("aiplatform-config", "scaleTier: CUSTOM\nmasterType: n1-standard-4\n"
                                          "masterConfig: {imageUri: 'img:1'}\n"),
    "merge keys, 25 levels (715 B)": ("aiplatform-config", merge_bomb(25)),
    "billion laughs 9x9": ("aiplatform-config", laughs(9, 9)),
    "flow nesting [[[... 64 KiB": ("vertex-config", "[" * 65_000),
    "64 KiB list of scalars": ("vertex-config", "[" + "a, " * 21_000 + "]"),
    "40 aliases of a 10 KB string": ("vertex-config", f"s: &s {'x' * 10_000}\nl: [" + ", ".join(["*s"] * 40) + "]\n"),
    "gcloud: 4,600 heredoc heads, no end": ("gcloud", "cat > f <<EOF\n" * 4600),
    "gcloud: merge bomb in a heredoc": ("gcloud", "cat > c.yaml <<EOF\n" + merge_bomb(25)
                                        + "EOF\ngcloud ai custom-jobs create --config=c.yaml"),
    "gcloud: 64 KiB of flags": ("gcloud", "gcloud ai custom-jobs create " + "--labels=a=b " * 5000),
}


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (the API process: its import workers are not counted)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-bombs-"))
    tmp.chmod(0o711)  # local replicas (none run here) would need to pass through
    db = f"sqlite:///{tmp / 'bench.db'}"
    migrate.upgrade(db)
    engine = make_engine(db)
    with make_session_factory(engine)() as session:
        _, token = create_token(session, get_or_create_team(session, "bench"), "bench", "admin", "bench")
        session.commit()
    engine.dispose()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
    env.update(TRAINJOBS_DATABASE_URL=db, TRAINJOBS_LOCAL_WORK_DIR=str(tmp / "runs"), TRAINJOBS_LOG_LEVEL="WARNING",
               TRAINJOBS_LOCAL_MAX_RUNNING_JOBS="0", TRAINJOBS_RUN_RECONCILER="false")
    log = open(tmp / "service.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory", "--host",
                             "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"],
                            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("bench: the service did not start")
            time.sleep(0.1)
        print(f"{'bomb':40s} {'bytes':>6s} {'answer':>6s} {'n':>3s} {'p50 ms':>7s} {'max ms':>7s} {'API CPU':>7s}   "
              f"/healthz p50 / p99 / max ms (n)")
        for name, (fmt, source) in BOMBS.items():
            stop = threading.Event()
            health: list[float] = []

            def probe():
                with httpx.Client(base_url=base, timeout=30) as c:
                    while not stop.is_set():
                        t = time.perf_counter()
                        c.get("/healthz")
                        health.append(time.perf_counter() - t)
                        stop.wait(0.02)
            prober = threading.Thread(target=probe)
            prober.start()
            took, codes = [], set()
            cpu_before = cpu_seconds(proc.pid)
            with httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {token}"}) as c:
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    t = time.perf_counter()
                    r = c.post("/v1/templates:import", json={"format": fmt, "source": source})
                    took.append(time.perf_counter() - t)
                    codes.add(r.status_code)
            stop.set()
            prober.join()
            # The API process's CPU per import (its /healthz answers included): what parsing in it cost.
            api_cpu = (cpu_seconds(proc.pid) - cpu_before) / len(took)
            print(f"{name:40s} {len(source.encode()):6d} {','.join(map(str, sorted(codes))):>6s} {len(took):3d} "
                  f"{pct(took, 0.5) * 1000:7.1f} {max(took) * 1000:7.1f} {api_cpu * 1000:7.1f}   {pct(health, 0.5) * 1000:.1f} / "
                  f"{pct(health, 0.99) * 1000:.1f} / {max(health) * 1000:.1f} ({len(health)})", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


if __name__ == "__main__":
    main()
