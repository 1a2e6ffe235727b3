"""Slurm backend benchmark, against a real cluster (munged, slurmctld, two slurmd nodes;
tests/backends/slurm/cluster.py) and the backend itself (no HTTP, no database: what
Slurm and the backend cost, not the API's part, which bench/api.py measures).

  start   submit() -> every task running (the backend's first RUNNING observation: all
          tasks' launchers have published an address and started the command), for a
          chief + worker job (two components, two nodes); polled every 20 ms
  submit  submit() for 1,000 jobs: its calls (one squeue lookup by name, one sbatch) and time
  pass    one pass over those 1,000 jobs (begin_pass, poll in batches of 500, end_pass):
          its Slurm calls and time, split into squeue and the rest

The 1,000 jobs stay PENDING (the partition is set DOWN first): the cluster has two nodes.
Needs root and the Slurm packages (scripts/test.sh installs them).

Run: .venv/bin/python bench/slurm.py [--runs 5] [--jobs 1000] [--passes 5]"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service import jobspec
from service.backends.slurm import SlurmBackend, SlurmConfig
from service.lifecycle.protocol import JobHandle
from service.lifecycle.states import JobState
from service.persistence.models import utcnow
from tests.backends.slurm.cluster import SlurmCluster

PROGRAM = ROOT / "tests" / "backends" / "slurm" / "programs" / "task.py"


def _spec(args: list[str]) -> dict:
    return {"container": {"image_uri": "bench:1", "command": ["python", str(PROGRAM)]},
            "chief": {"container": {"args": args}}, "workers": {"replica_count": 1, "container": {"args": args}}}


def _compiled(args: list[str]):
    return jobspec.build(_spec(args), [], {}, None, display_name="bench", labels={})[1]


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_start(backend: SlurmBackend, runs: int, gate_dir: Path) -> list[float]:
    out = []
    for i in range(runs):
        gate = gate_dir / f"go-{i}"
        compiled = _compiled(["--wait-file", str(gate)])
        job = JobHandle(uuid.uuid4(), JobState.QUEUED, None, compiled, utcnow())
        t0 = time.perf_counter()
        ref = backend.submit(job).backend_ref
        job = JobHandle(job.id, JobState.PENDING, ref, compiled, job.created_at)
        deadline = time.monotonic() + 120
        while True:
            obs = [o for o in backend.poll([job]) if o.state == JobState.RUNNING]
            if obs:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the job did not start within 120 s")
            time.sleep(0.02)
        out.append(time.perf_counter() - t0)
        gate.touch()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--passes", type=int, default=5)
    a = p.parse_args()
    cluster = SlurmCluster().start()
    work = Path(tempfile.mkdtemp(prefix="tjs-bench-"))
    os.chmod(work, 0o711)
    gates = work / "gates"
    gates.mkdir()
    os.chmod(gates, 0o777)
    try:
        cfg = SlurmConfig(conf=cluster.conf, bin_path=cluster.env["PATH"], work_dir=work / "runs", python=sys.executable,
                          job_user="nobody", partition=None, account=None, qos=None, allowed_partitions=(), allowed_accounts=(), allowed_qos=(),
                          cpus_per_task=1, mem_per_cpu_mb=None, max_running=None, command_timeout=30,
                          poll_interval=0, rendezvous_timeout=300)
        backend = SlurmBackend(cfg)
        backend.start_client()
        starts = bench_start(backend, a.runs, gates)
        print(f"start (submit -> every task running, chief + worker on two nodes), {a.runs} runs: "
              f"median {statistics.median(starts) * 1000:.0f} ms, min {min(starts) * 1000:.0f}, "
              f"max {max(starts) * 1000:.0f}")
        cluster.cancel_all()

        cluster.run("scontrol", "update", "PartitionName=debug", "State=DOWN")
        compiled = _compiled(["--lines", "1"])
        handles, times = [], []
        before = dict(backend.cli.stats.calls)
        for _ in range(a.jobs):
            job = JobHandle(uuid.uuid4(), JobState.QUEUED, None, compiled, utcnow())
            t0 = time.perf_counter()
            ref = backend.submit(job).backend_ref
            times.append(time.perf_counter() - t0)
            handles.append(JobHandle(job.id, JobState.PENDING, ref, compiled, job.created_at))
        calls = {k: v - before.get(k, 0) for k, v in backend.cli.stats.calls.items()}
        print(f"submit, {a.jobs} jobs: {sum(times):.1f} s in all, median {statistics.median(times) * 1000:.1f} ms, "
              f"p99 {_pct(times, 0.99) * 1000:.1f} ms; calls {calls}")

        for label, state in (("PENDING, nothing new", JobState.PENDING), ("QUEUED, each observed", JobState.QUEUED)):
            jobs = [JobHandle(h.id, state, h.backend_ref, compiled, h.created_at) for h in handles]
            totals, squeue_s, calls_per = [], [], []
            for _ in range(a.passes):
                c0 = dict(backend.cli.stats.calls)
                s0 = backend.cli.stats.seconds.get("squeue", 0.0)
                t0 = time.perf_counter()
                backend.begin_pass()
                seen = 0
                for i in range(0, len(jobs), 500):
                    seen += len(backend.poll(jobs[i:i + 500]))
                backend.end_pass()
                totals.append(time.perf_counter() - t0)
                squeue_s.append(backend.cli.stats.seconds.get("squeue", 0.0) - s0)
                calls_per.append(sum(v - c0.get(k, 0) for k, v in backend.cli.stats.calls.items()))
            print(f"pass over {a.jobs} jobs ({label}; {seen} observations), {a.passes} passes: median "
                  f"{statistics.median(totals) * 1000:.0f} ms (squeue --json {statistics.median(squeue_s) * 1000:.0f} "
                  f"ms of it), Slurm calls per pass {sorted(set(calls_per))}")
    finally:
        cluster.stop()
        cluster.remove()
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
