"""Hostile clients against one `trainjobs serve` process (issue 22), on SQLite.

1. slow: authenticated GET /v1/jobs?limit=5, one after the other for SECONDS, alone and
   with 40 and 400 slow anonymous clients (a POST head with Content-Length: 100000, then a
   byte a second; cut at TRAINJOBS_HTTP_BODY_TIMEOUT_SECONDS, they connect again at once).
   Prints the GETs' p50/p99 and their non-200 answers, and how often the slow ones were cut.
2. memory: a job whose two replicas print 512 MiB each of lines of 60,000 \\x01 (escaped
   to 6 bytes each in JSON: 6 GiB as sent), followed by 2 readers, then by 2 readers and
   198 followers that never read. Prints the service's RSS idle and its peak while the
   lines flow, and whether it survived; each reader must see every line, in order.
3. stop: 1,000 API followers and 20 UI streams (10 live feeds, 10 log streams) of a
   running job, then SIGINT: prints the seconds to exit, that every stream got `reconnect`,
   and that the job still runs.

Clients run in a process of their own (their parsing would otherwise share the timing
client's GIL). Run: .venv/bin/python bench/hostile.py [--only slow|memory|stop] [--seconds 20]
    [--gib 1]"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import resource
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKEN = "tj_" + secrets.token_urlsafe(32)
H = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))


class Service:
    def __init__(self, work: Path, **env) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.work = work
        os.chmod(work, 0o711)  # local replicas run as unprivileged uids: they pass through to runs/
        full = {k: v for k, v in os.environ.items() if not k.startswith("TRAINJOBS_")}
        full.update({"TRAINJOBS_DATABASE_URL": f"sqlite:///{work / 'db.sqlite'}", "TRAINJOBS_BOOTSTRAP_TOKEN": TOKEN,
                     "TRAINJOBS_SEED_DEMO_TEMPLATE": "true", "TRAINJOBS_LOG_FORMAT": "text",
                     "TRAINJOBS_LOCAL_WORK_DIR": str(work / "runs"), "PYTHONPATH": str(ROOT),
                     "TRAINJOBS_LOCAL_REPLICA_UID_BASE": os.environ.get("TRAINJOBS_LOCAL_REPLICA_UID_BASE", "200000"),
                     **{f"TRAINJOBS_{k.upper()}": str(v) for k, v in env.items()}})
        self.log_path = work / "service.log"
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port", str(self.port),
                                      "--log-level", "warning"], env=full, cwd=work, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=raise_fd_limit)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit(f"the service did not start; see {self.log_path}")
        self.ps = psutil.Process(self.proc.pid)
        self.client = httpx.Client(base_url=self.url, headers=H, timeout=60)

    def rss_mib(self) -> float:
        return self.ps.memory_info().rss / 2**20

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


# -- clients, in a process of their own ---------------------------------------------------

async def _slow_one(port: int, stop: float, cut: list) -> None:
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n{")
            while time.monotonic() < stop:
                try:
                    data = await asyncio.wait_for(reader.read(65536), 1.0)
                except TimeoutError:
                    writer.write(b" ")  # a byte now and then
                    await writer.drain()
                    continue
                if not data or data.startswith(b"HTTP/1.1 408") or data.startswith(b"HTTP/1.1"):
                    cut.append(data[:12])
                    break
            writer.close()
        except OSError:
            await asyncio.sleep(0.1)


def slow_clients(port: int, n: int, seconds: float, out) -> None:
    async def main():
        cut: list = []
        stop = time.monotonic() + seconds
        await asyncio.gather(*(_slow_one(port, stop, cut) for _ in range(n)))
        out.put({"cut": len(cut), "answers": sorted({c.decode(errors="replace") for c in cut})})
    raise_fd_limit()
    asyncio.run(main())


async def _follow(port: int, path: str, head: str, mode: str, result: dict) -> None:
    """mode read: read everything, resume after resync/reconnect until `end`; stall: read the
    response head, then never read again; stop: read until the server closes."""
    last = None
    while True:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
        extra = f"Last-Event-ID: {last}\r\n" if last else ""
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n{head}{extra}\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        result["open"] = result.get("open", 0) + 1
        if mode == "stall":
            writer.transport.pause_reading()  # asyncio would otherwise keep reading into its buffer
            await asyncio.sleep(3600)
            return
        ended = None
        buf = b""
        while True:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            buf += chunk
            *events, buf = buf.split(b"\n\n")
            for ev in events:
                if ev.startswith(b"id: "):
                    last = ev[4:ev.index(b"\n")].decode()
                if b"event: log" in ev:
                    result["lines"] = result.get("lines", 0) + 1
                    if mode == "read" and b"line cut for streaming" not in ev:
                        result["uncut"] = result.get("uncut", 0) + 1  # every one of these lines is cut
                for kind in (b"end", b"resync", b"reconnect"):
                    if b"event: " + kind + b"\n" in ev:
                        ended = kind.decode()
                        result[ended] = result.get(ended, 0) + 1
        writer.close()
        if mode == "stop" or ended == "end":
            return


def followers(port: int, specs: list, out) -> None:
    """specs: (path, head, mode, count)."""
    async def main():
        results = []
        tasks = []
        for path, head, mode, count in specs:
            for _ in range(count):
                r = {"mode": mode}
                results.append(r)
                tasks.append(asyncio.create_task(_follow(port, path, head, mode, r)))
        done = asyncio.create_task(asyncio.sleep(3600))

        async def report():
            while True:
                await asyncio.sleep(0.2)
                out.put({"opened": sum(r.get("open", 0) for r in results)})
        rep = asyncio.create_task(report())
        readers = [t for t, r in zip(tasks, results, strict=False) if r["mode"] != "stall"]
        await asyncio.wait(readers)
        rep.cancel()
        done.cancel()
        for t in tasks:
            if t.done() and t.exception():
                out.put({"error": repr(t.exception())})
        out.put({"results": [r for r in results if r["mode"] != "stall"]})
    raise_fd_limit()
    asyncio.run(main())


# -- the parts --------------------------------------------------------------------------

def part_slow(seconds: float) -> None:
    print("## slow anonymous bodies (the service has 32 request slots)")
    with tempfile.TemporaryDirectory(prefix="hostile-slow-") as tmp:
        svc = Service(Path(tmp), http_body_timeout_seconds=10)
        try:
            for _ in range(5):
                svc.client.post("/v1/jobs", json={"template": "mwms-demo"})
            for n in (0, 40, 400):
                q = multiprocessing.Queue()
                proc = None
                if n:
                    proc = multiprocessing.Process(target=slow_clients, args=(svc.port, n, seconds + 5, q))
                    proc.start()
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:
                        m = re.search(r"^trainjobs_request_bodies_reading (\S+)$",
                                      httpx.get(svc.url + "/metrics").text, re.M)
                        if m and float(m.group(1)) >= n * 0.95:
                            break
                        time.sleep(0.1)
                lat, bad = [], 0
                stop = time.monotonic() + seconds
                with httpx.Client(base_url=svc.url, headers=H, timeout=30) as c:
                    while time.monotonic() < stop:
                        t0 = time.perf_counter()
                        r = c.get("/v1/jobs", params={"limit": 5})
                        lat.append((time.perf_counter() - t0) * 1000)
                        bad += r.status_code != 200
                cut = ""
                if proc:
                    got = q.get(timeout=60)
                    proc.join(30)
                    cut = f"; slow clients cut {got['cut']} times ({', '.join(got['answers'])})"
                print(f"slow clients {n:4d}: {len(lat)} GETs, p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms, "
                      f"non-200 {bad}{cut}", flush=True)
        finally:
            svc.stop()


HOSTILE = ("import sys\n"
           "line = '\\x01' * 60000\n"
           "w = sys.stdout.write\n"
           "for i in range(int(sys.argv[1])):\n"
           "    w(f'{i:07d}' + line + '\\n')\n"
           "sys.stdout.flush()\n")


def part_memory(gib: float) -> None:
    print("## memory: a job printing hostile lines")
    lines_per_replica = int(gib * 2**30 / 2 / 60_008)
    for n_stall in (0, 198):
        with tempfile.TemporaryDirectory(prefix="hostile-mem-") as tmp:
            svc = Service(Path(tmp), max_streams_per_caller=1000)
            try:
                spec = {"container": {"image_uri": "local", "command": ["python", "-c", HOSTILE,
                                                                        str(lines_per_replica)]},
                        "workers": {"replica_count": 1}}
                # The job waits for its followers: it starts only once they are attached.
                r = svc.client.post("/v1/templates", json={"name": "hostile", "spec": spec})
                assert r.status_code == 201, r.text
                time.sleep(1)
                idle = svc.rss_mib()
                hold = svc.client.post("/v1/jobs", json={"template": "hostile"}).json()
                # Followers attach while the job is queued behind nothing: follow at once.
                q = multiprocessing.Queue()
                path = f"/v1/jobs/{hold['id']}/logs?follow=true"
                specs = [(path, f"Authorization: Bearer {TOKEN}\r\n", "read", 2)]
                if n_stall:
                    specs.append((path, f"Authorization: Bearer {TOKEN}\r\n", "stall", n_stall))
                proc = multiprocessing.Process(target=followers, args=(svc.port, specs, q))
                peak, stop = [idle], threading.Event()

                def sample():
                    while not stop.is_set():
                        try:
                            peak[0] = max(peak[0], svc.rss_mib())
                        except psutil.Error:
                            return
                        stop.wait(0.05)
                t = threading.Thread(target=sample)
                t.start()
                t0 = time.monotonic()
                proc.start()
                result = None
                while result is None:
                    m = q.get(timeout=1800)
                    if "error" in m:
                        print("follower error:", m["error"])
                    result = m.get("results")
                seconds = time.monotonic() - t0
                stop.set()
                t.join()
                proc.kill()
                alive = svc.proc.poll() is None
                lines = [r.get("lines", 0) for r in result]
                print(f"followers {2 + n_stall:3d} (2 reading, {n_stall} never reading): RSS idle {idle:.0f} MiB, "
                      f"peak {peak[0]:.0f} MiB (+{peak[0] - idle:.0f}); service alive: {alive}; each reader got "
                      f"{lines} of {2 * lines_per_replica} lines, ends {[r.get('end', 0) for r in result]}, "
                      f"resyncs {[r.get('resync', 0) for r in result]}, uncut {[r.get('uncut', 0) for r in result]}, "
                      f"in {seconds:.0f} s", flush=True)
            finally:
                svc.stop()


def part_stop(n: int) -> None:
    print("## stop: SIGINT with open streams")
    with tempfile.TemporaryDirectory(prefix="hostile-stop-") as tmp:
        svc = Service(Path(tmp), max_streams_per_caller=2000, max_concurrent_requests=32)
        try:
            spec = {"container": {"image_uri": "local", "command": [
                "python", "-c", "import time\nwhile True: print('tick', flush=True); time.sleep(1)"]},
                "workers": {"replica_count": 1}}
            assert svc.client.post("/v1/templates", json={"name": "ticker", "spec": spec}).status_code == 201
            job = svc.client.post("/v1/jobs", json={"template": "ticker"}).json()
            while svc.client.get(f"/v1/jobs/{job['id']}").json()["state"] != "RUNNING":
                time.sleep(0.2)
            with httpx.Client(base_url=svc.url, timeout=30) as c:
                page = c.get("/ui/login").text
                csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
                c.post("/ui/login", data={"csrf": csrf, "token": TOKEN, "next": "/ui/jobs"})
                cookie = f"Cookie: trainjobs_session={c.cookies['trainjobs_session']}\r\n"
            q = multiprocessing.Queue()
            specs = [(f"/v1/jobs/{job['id']}/logs?follow=true", f"Authorization: Bearer {TOKEN}\r\n", "stop", n),
                     ("/ui/stream", cookie, "stop", 10), (f"/ui/jobs/{job['id']}/logs/stream", cookie, "stop", 10)]
            proc = multiprocessing.Process(target=followers, args=(svc.port, specs, q))
            proc.start()
            opened = 0
            while opened < n + 20:
                opened = q.get(timeout=300).get("opened", opened)
            replicas = [p for p in psutil.process_iter() if p.pid != svc.proc.pid and _of_run(p, job["id"])]
            t0 = time.monotonic()
            svc.proc.send_signal(signal.SIGINT)
            code = svc.proc.wait(120)
            exit_s = time.monotonic() - t0
            result = None
            while result is None:
                result = q.get(timeout=120).get("results")
            proc.join(30)
            got = sum(1 for r in result if r.get("reconnect"))
            running = sum(p.is_running() for p in replicas)
            print(f"{n} API followers + 20 UI streams: exit {exit_s:.2f} s after SIGINT (code {code}); "
                  f"{got} of {len(result)} streams ended with reconnect; job replicas still running "
                  f"{running} of {len(replicas)}", flush=True)
            for p in replicas:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        finally:
            svc.stop()


def _of_run(p: psutil.Process, job_id: str) -> bool:
    from service.backends.local.processes import MARKER
    try:
        return p.environ().get(MARKER, "").startswith(f"{job_id}/")
    except psutil.Error:
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["slow", "memory", "stop"])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--followers", type=int, default=1000)
    a = ap.parse_args()
    if a.only in (None, "slow"):
        part_slow(a.seconds)
    if a.only in (None, "memory"):
        part_memory(a.gib)
    if a.only in (None, "stop"):
        part_stop(a.followers)


if __name__ == "__main__":
    main()
