"""What the local sandbox costs (run as root): per job and per replica, in ms.

  job       start_holder(): the job's namespaces set up (unshare, an empty root with
            only what a replica needs bound in, pivot_root, loopback) until its init says "ready"; and its
            teardown (SIGKILL of the init until it is gone)
  replica   a wrapper started with its spec on stdin until its command (/bin/true,
            as the job's uid) has ended and the exit record is written: joined to
            the job's namespaces vs not (the difference is the per-replica cost)

  --demo    the demo (mwms-demo: chief + worker, real TensorFlow) through a real service
            process, POST -> SUCCEEDED, sandboxed and not (--demo-runs each)

Job start as the client sees it (POST -> every replica running) is bench/local.py
(--sandbox namespaces|none). Run: .venv/bin/python bench/sandbox.py [--runs 30] [--demo]"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.backends.local import processes, sandbox  # noqa: E402

UID = 300_990  # a replica uid of this bench's own (outside any running service's range by default)


def ms(values: list[float]) -> str:
    values = sorted(values)
    return f"p50 {statistics.median(values) * 1000:.1f} ms, max {values[-1] * 1000:.1f} ms"


def holder_once(run: Path) -> tuple[float, float, int, float]:
    t0 = time.perf_counter()
    python = Path(sys.executable)
    plan = sandbox.HolderPlan(writable=[run], visible=[ROOT, python.parent.parent, python.resolve().parent.parent],
                              hidden=[run.parent], uid=UID, run=run)
    pid, created = sandbox.start_holder(plan, None)
    t1 = time.perf_counter()
    return t1 - t0, t1, pid, created


def teardown(pid: int, created: float) -> float:
    t0 = time.perf_counter()
    sandbox.kill_holder(pid, created)
    for _ in range(10_000):
        if not processes.is_alive(pid, created):
            break
        time.sleep(0.001)
    return time.perf_counter() - t0


def replica_once(run: Path, i: int, join: int | None) -> float:
    exit_file = run / f"r{i}.exit"
    t0 = time.perf_counter()
    popen = sandbox.spawn_wrapper(log=run / f"r{i}.log", started=run / f"r{i}.started", exit=exit_file,
                                  wrapper_log=run / f"r{i}.wrapper", uid=UID)
    sandbox.send_spec(popen, argv=["/bin/true"], env={"PATH": "/usr/bin:/bin"}, cwd=run / "work", join=join)
    popen.wait(60)
    assert exit_file.exists(), (run / f"r{i}.wrapper").read_text()
    return time.perf_counter() - t0


def demo(runs: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from local import Bench, wait  # noqa: E402  (bench/local.py: a real service process)

    from service.demo import demo_template  # noqa: E402

    for mode in ("namespaces", "none"):
        walls = []
        with tempfile.TemporaryDirectory(prefix="trainjobs-demo-bench-") as tmp:
            b = Bench(Path(tmp), mode)
            try:
                r = b.c.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True))
                assert r.status_code == 201, r.text
                wait(lambda: b.c.get("/v1/templates/mwms-demo").status_code == 200, "the demo template")
                for _ in range(runs):
                    t0 = time.time()
                    r = b.c.post("/v1/jobs", json={"template": "mwms-demo"})
                    assert r.status_code == 201, r.text
                    state = wait(lambda: (s := b.state(r.json()["id"])) in ("SUCCEEDED", "FAILED") and s,
                                 "the demo to end", timeout=900, interval=0.1)
                    assert state == "SUCCEEDED", b.c.get(f"/v1/jobs/{r.json()['id']}").json()["error"]
                    walls.append(time.time() - t0)
            finally:
                b.close()
        print(f"demo (mwms-demo) POST -> SUCCEEDED, sandbox={mode:<10} "
              f"median {statistics.median(walls):.1f} s ({', '.join(f'{w:.1f}' for w in walls)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--demo", action="store_true")
    ap.add_argument("--demo-runs", type=int, default=2)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/sandbox.py: the sandbox exists only for a root service; run as root")
    if args.demo:
        demo(args.demo_runs)
        return
    with tempfile.TemporaryDirectory(prefix="trainjobs-sandbox-bench-") as tmp:
        run = Path(tmp)
        os.chmod(run, 0o711)
        (run / "work").mkdir()
        os.chown(run / "work", UID, UID)
        starts, downs, plain, joined = [], [], [], []
        for i in range(args.runs):
            took, _, pid, created = holder_once(run)
            starts.append(took)
            plain.append(replica_once(run, 2 * i, None))
            joined.append(replica_once(run, 2 * i + 1, pid))
            downs.append(teardown(pid, created))
    extra = statistics.median(joined) - statistics.median(plain)
    print(f"job sandbox set-up (start_holder)      {ms(starts)}")
    print(f"job sandbox teardown (SIGKILL -> gone)  {ms(downs)}")
    print(f"replica, unsandboxed wrapper + /bin/true {ms(plain)}")
    print(f"replica, in the job's namespaces         {ms(joined)}")
    print(f"per-replica cost of the sandbox          {extra * 1000:+.1f} ms (median difference)")
    print(f"({args.runs} runs)")


if __name__ == "__main__":
    main()
