"""Helpers for the trainer tests: real `python -m trainer.task` subprocesses.

Every TensorFlow process costs seconds to import, so the tests keep models tiny
(tiny_cnn, 32x32 images) and runs short; the assertions are about behaviour
(who saved what, which epoch ran, what got evaluated), never about speed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The flags the service's demo template passes (plus sizes of our choosing).
DEMO_ARGS = ["--dataset=synthetic", "--model=tiny_cnn", "--image-size=32"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vertex_tf_config(cluster: dict[str, list[str]], task_type: str, index: int, evaluator: bool = False,
                     **task_extra) -> str:
    """TF_CONFIG exactly as Vertex AI writes it on each replica. The evaluator is
    never in "cluster" but its pool (pool 3) is in the job spec."""
    def pool(count):
        return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": str(count),
                "containerSpec": {"imageUri": "trainer:test"}}

    pools = [pool(1), pool(len(cluster.get("worker", []))) if cluster.get("worker") else {},
             pool(len(cluster.get("ps", []))) if cluster.get("ps") else {}, pool(1) if evaluator else {}]
    while pools and not pools[-1]:
        pools.pop()
    return json.dumps({
        "cluster": cluster,
        "task": {"type": task_type, "index": index, **task_extra},
        "environment": "cloud",
        "job": {"workerPoolSpecs": pools,
                "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/job"}},
    })


def vertex_cluster_spec(pools: dict[str, list[str]], pool: str, index: int, **task_extra) -> str:
    """CLUSTER_SPEC as Vertex AI writes it (pools named workerpool0..3)."""
    last = max(int(name.removeprefix("workerpool")) for name in pools)
    specs = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": str(len(pools[f"workerpool{i}"])),
              "container_spec": {"image_uri": "trainer:test"}} if pools.get(f"workerpool{i}") else {}
             for i in range(last + 1)]
    return json.dumps({"cluster": pools, "environment": "cloud",
                       "task": {"type": pool, "index": index, **task_extra},
                       "job": {"worker_pool_specs": specs}})


def trainer_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CONFIG", "CLUSTER_SPEC", "TF_USE_LEGACY_KERAS")
           and not k.startswith("AIP_") and not k.startswith("TRAINJOBS_")}
    env["PYTHONPATH"] = str(REPO)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def events(stdout: str) -> list[dict]:
    """The structured progress lines among everything else a replica prints."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict) and "event" in doc:
                out.append(doc)
    return out


def of(evts: list[dict], name: str) -> list[dict]:
    return [e for e in evts if e["event"] == name]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        return events(self.stdout)

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-5000:]}"


def output_flags(root: Path) -> list[str]:
    return [f"--model-dir={root / 'model'}", f"--checkpoint-dir={root / 'checkpoints'}",
            f"--tensorboard-dir={root / 'logs'}"]


class Replicas:
    """Starts trainer processes with stdout/stderr in files; kills leftovers."""

    def __init__(self, tmp_path: Path):
        self._dir = tmp_path / "replica-logs"
        self._dir.mkdir(exist_ok=True)
        self._procs: list[tuple[subprocess.Popen, Path, Path]] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        out, err = self._dir / f"{name}.out", self._dir / f"{name}.err"
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=env,
            stdout=out.open("w"), stderr=err.open("w"),
        )
        self._procs.append((proc, out, err))
        return proc

    def wait(self, proc: subprocess.Popen, timeout: float = 180) -> Run:
        for p, out, err in self._procs:
            if p is proc:
                try:
                    code = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    code = -9
                return Run(code, out.read_text(), err.read_text())
        raise KeyError(proc)

    def kill_all(self) -> None:
        for p, _, _ in self._procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def run_trainer(args: list[str], env: dict[str, str] | None = None, timeout: float = 180) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=env or trainer_env(),
        capture_output=True, text=True, timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def write_jpeg_examples(tf, count: int, num_classes: int, seed: int = 0, size=(40, 48)):
    """(JPEG bytes, label) pairs: each class a distinct colour, plus noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    colours = rng.uniform(0, 255, (num_classes, 3))
    out = []
    for i in range(count):
        label = i % num_classes
        pixels = 0.6 * colours[label] + 0.4 * rng.uniform(0, 255, (*size, 3))
        out.append((tf.io.encode_jpeg(pixels.astype("uint8")).numpy(), label))
    return out
