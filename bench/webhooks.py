"""Webhooks benchmark: PostgreSQL, the app in this process, a real receiver on 127.0.0.1.

Measures what the outbox adds to one job state change (a transaction with the change,
its event and, when the team has matching webhooks, the delivery rows), and how many
deliveries per second the controller's dispatcher sends to a receiver that answers at
once, by concurrency.
Run: .venv/bin/python bench/webhooks.py [--changes 500] [--deliveries 3000]"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import func, insert, select  # noqa: E402

from service.app import create_app  # noqa: E402
from service.auth.service import create_token, get_or_create_team  # noqa: E402
from service.lifecycle.engine import Engine  # noqa: E402
from service.lifecycle.states import JobState  # noqa: E402
from service.persistence import migrate  # noqa: E402
from service.persistence.models import WebhookDelivery  # noqa: E402
from service.persistence.session import make_engine, make_session_factory  # noqa: E402
from service.slices import Settings, webhook_limits  # noqa: E402
from service.webhooks.dispatcher import Dispatcher  # noqa: E402
from service.webhooks.outbox import Outbox, pending_row  # noqa: E402

ADMIN = os.environ.get("TRAINJOBS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
DB = "trainjobs_bench_webhooks"
TEMPLATE = {"name": "t", "spec": {"container": {"image_uri": "local", "command": ["true"]}}}


# The receiver runs in a process of its own, as a real one would (in this process it would
# compete with the dispatcher for the GIL).
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *args): pass
ThreadingHTTPServer.request_queue_size = 512
server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--changes", type=int, default=500)
    p.add_argument("--deliveries", type=int, default=3000)
    a = p.parse_args()
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    url = ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + DB
    migrate.upgrade(url)
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    hook_url = f"http://127.0.0.1:{int(receiver.stdout.readline())}/hooks"
    settings = Settings(database_url=url, run_reconciler=False, local_max_running_jobs=0, seed_demo_template=False,
                        webhook_allowed_networks=["127.0.0.1/32"], webhook_max_per_team=1000)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    with sessions() as s:
        team = get_or_create_team(s, "bench")
        _, token = create_token(s, team, "bench", "admin", "bench")
        s.commit()
    print(f"PostgreSQL, {a.changes} state changes per case, one transaction each")
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.post("/v1/templates", json=TEMPLATE).status_code == 201
        limits = webhook_limits(settings)
        cases = [("no outbox listener", None, 0), ("outbox, team without webhooks", Outbox(limits), 0),
                 ("outbox, 3 matching webhooks", Outbox(limits), 3)]
        for name, outbox, hooks in cases:
            for _ in range(hooks):
                r = client.post("/v1/webhooks", json={"url": hook_url, "event_types": ["job.cancelled"]})
                assert r.status_code == 201, r.text
            jobs = [uuid.UUID(client.post("/v1/jobs", json={"template": "t"}).json()["id"]) for _ in range(a.changes)]
            lifecycle = Engine()
            if outbox:
                lifecycle.listen(outbox.on_change)
            times = []
            for job_id in jobs:
                with sessions() as s:
                    t0 = time.perf_counter()
                    lifecycle.move(s, job_id, JobState.CANCELLED, reason="bench", actor="bench")
                    s.commit()
                    times.append(time.perf_counter() - t0)
            print(f"  {name:34s} p50 {statistics.median(times) * 1000:6.2f} ms  "
                  f"p99 {sorted(times)[int(len(times) * 0.99)] * 1000:6.2f} ms")
        with sessions() as s:
            pending = s.scalar(select(func.count()).select_from(WebhookDelivery)
                               .where(WebhookDelivery.status == "pending"))
        print(f"  ({pending} deliveries recorded by the last case)")

        hook = client.post("/v1/webhooks", json={"url": hook_url}).json()
        print(f"dispatcher: {a.deliveries} deliveries to a receiver on 127.0.0.1 that answers 200 at once")
        for concurrency in (1, 10, 50):
            for _ in range(a.deliveries // 100):
                with sessions() as s:  # rows as the outbox writes them, 100 a transaction
                    s.execute(insert(WebhookDelivery), [pending_row(uuid.UUID(hook["id"]), f"msg_{uuid.uuid4().hex}",
                                                                    "webhook.test", None, {"type": "webhook.test",
                                                                                           "data": {"n": i}})
                                                        for i in range(100)])
                    s.commit()
            with sessions() as s:  # what the earlier cases left pending goes first
                s.execute(WebhookDelivery.__table__.update().where(WebhookDelivery.status == "pending",
                                                                   WebhookDelivery.job_id.is_not(None))
                          .values(status="failed"))
                s.commit()
            d = Dispatcher(sessions, Engine(), dataclasses.replace(limits, concurrency=concurrency, batch_size=200),
                           fence=None)
            t0 = time.perf_counter()
            while d.run_once():
                pass
            took = time.perf_counter() - t0
            assert d.failed == 0, d.failed
            print(f"  concurrency {concurrency:3d}: {d.sent / took:7.0f} deliveries/s ({d.sent} in {took:.1f} s)")
    engine.dispose()
    receiver.kill()
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')


if __name__ == "__main__":
    main()
