"""Vertex backend benchmark: what one reconcile tick costs with many active jobs.

Against the fake JobService on 127.0.0.1 (real HTTP, the real JobServiceClient in
REST mode), with N active jobs submitted through POST /v1/jobs of the real app
(SQLite): API calls and wall time of Reconciler.run_once() when nothing changed,
when 5% of the jobs ended, and, measured in the same run, a naive loop of one
get_custom_job per active job.

Run: .venv/bin/python bench/vertex.py [--jobs 1000] [--ticks 5]"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from service import migrate  # noqa: E402
from service.app import create_app  # noqa: E402
from service.config import Settings  # noqa: E402
from service.demo import demo_template  # noqa: E402
from tests.conftest import bearer, make_token  # noqa: E402
from tests.fakes.cloud_logging import FakeCloudLogging  # noqa: E402
from tests.fakes.vertex_jobs import FakeJobService  # noqa: E402


def measure(fake: FakeJobService, fn) -> tuple[int, float, dict]:
    fake.reset_calls()
    t0 = time.perf_counter()
    fn()
    return fake.total_calls, time.perf_counter() - t0, dict(fake.calls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=5, help="steady ticks to time (median and max reported)")
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=500)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp, FakeJobService() as fake, FakeCloudLogging() as fake_logs:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        migrate.upgrade(url)
        settings = Settings(database_url=url, backends=["vertex"], default_backend="vertex", run_reconciler=False,
                            seed_demo_template=False, vertex_project=fake.project, vertex_location=fake.location,
                            vertex_api_endpoint=fake.url, logging_api_endpoint=fake_logs.url,
                            vertex_list_page_size=args.page_size, reconcile_batch_size=args.batch_size)
        headers = bearer(make_token(url, "bench", "admin"))
        with TestClient(create_app(settings), headers=headers) as client:
            r = client.post("/v1/templates", json=demo_template().model_dump(mode="json", exclude_none=True))
            assert r.status_code == 201, r.text
            t0 = time.perf_counter()
            for _ in range(args.jobs):
                r = client.post("/v1/jobs", json={"template": "mwms-demo"})
                assert r.status_code == 201 and r.json()["backend_ref"], r.text
            submit_s = time.perf_counter() - t0
            submit_calls = fake.total_calls
            reconciler = client.app.state.reconciler
            backend = client.app.state.backends["vertex"]
            names = list(fake.jobs)
            for name in names:
                fake.set_state(name, "JOB_STATE_RUNNING")
            first = reconciler.run_once()
            assert first.changed == args.jobs, first

            rows = []
            steady = [measure(fake, reconciler.run_once) for _ in range(args.ticks)]
            calls = {c for c, _, _ in steady}
            rows.append((f"reconcile tick, {args.jobs} running, no change", max(calls),
                         statistics.median(s for _, s, _ in steady), max(s for _, s, _ in steady),
                         steady[0][2]))

            ended = names[:: 20]  # 5% end between two ticks
            for i, name in enumerate(ended):
                fake.set_state(name, "JOB_STATE_SUCCEEDED" if i % 2 else "JOB_STATE_FAILED",
                               error=None if i % 2 else (3, "exit status 1"))
            stats_box = {}
            c, s, detail = measure(fake, lambda: stats_box.setdefault("s", reconciler.run_once()))
            assert stats_box["s"].changed == len(ended), stats_box["s"]
            rows.append((f"reconcile tick, {len(ended)} of them ended", c, s, s, detail))

            active = names[:]
            for n in ended:
                active.remove(n)
            naive = []
            for _ in range(max(1, args.ticks // 2)):
                naive.append(measure(fake, lambda: [backend.client.get_custom_job(name=n, timeout=10)
                                                    for n in active]))
            rows.append((f"naive: one get per job ({len(active)} jobs)", naive[0][0],
                         statistics.median(s for _, s, _ in naive), max(s for _, s, _ in naive), naive[0][2]))

        print(f"\nvertex backend, fake JobService on 127.0.0.1; batch {args.batch_size}, "
              f"page size {args.page_size}; {args.jobs} jobs submitted in {submit_s:.1f} s "
              f"({submit_calls} calls: label lookup + create each)\n")
        print(f"| {'what':<44} | {'API calls':>9} | {'wall median':>11} | {'wall max':>8} | calls by method")
        print(f"|{'-' * 46}|{'-' * 11}|{'-' * 13}|{'-' * 10}|{'-' * 30}")
        for what, c, med, mx, detail in rows:
            by = ", ".join(f"{k} {v}" for k, v in sorted(detail.items()))
            print(f"| {what:<44} | {c:>9} | {med:>9.3f} s | {mx:>6.3f} s | {by}")
        print()


if __name__ == "__main__":
    main()
