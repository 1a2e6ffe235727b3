"""A stand-in for a training replica, for the local backend's tests.

Standard library only (fast to start). What it does is set by flags, so one
template can make each role behave differently through per-role args."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def role() -> str:
    tf = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    return f"{tf.get('type', 'chief')}:{tf.get('index', 0)}"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=0, help="print this many numbered lines")
    p.add_argument("--stderr-lines", type=int, default=0)
    p.add_argument("--line-interval", type=float, default=0.0)
    p.add_argument("--timestamps", action="store_true", help="put time.time() in each line (bench)")
    p.add_argument("--epochs", type=int, default=0, help="print trainer-style epoch_end lines")
    p.add_argument("--val-accuracy", type=float, help="epoch_end lines also report val_accuracy: this value "
                   "in epoch 1, 0.05 less in later ones (a best epoch that is not the last)")
    p.add_argument("--dump-env", help="write os.environ as JSON to DIR/<task>.json")
    p.add_argument("--started-dir", help="write DIR/<task>.started with time.time() at start")
    p.add_argument("--wait-file", action="append", help="wait until this file exists (repeat: until all do)")
    p.add_argument("--lines-after", type=int, default=0, help="numbered lines printed after the wait")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--spawn-child", action="store_true", help="leave a sleeping grandchild behind")
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--message", default="", help="last line before exiting")
    a = p.parse_args()
    t0 = time.time()
    task = os.environ.get("TRAINJOBS_LOCAL_REPLICA", "?/?").split("/", 1)[1]
    if a.started_dir:
        with open(os.path.join(a.started_dir, f"{task}.started"), "w") as f:
            f.write(repr(t0))
    if a.ignore_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
    if a.dump_env:
        trial = os.environ.get("CLOUD_ML_TRIAL_ID")   # a sweep's trials share task names
        with open(os.path.join(a.dump_env, f"trial{trial}-{task}.json" if trial else f"{task}.json"), "w") as f:
            json.dump(dict(os.environ), f)
    if a.spawn_child:
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"hello from {task} as {role()}", flush=True)
    for i in range(a.lines):
        print(f"{time.time()!r} line {i}" if a.timestamps else f"{task} line {i}")
        if a.line_interval:
            sys.stdout.flush()
            time.sleep(a.line_interval)
    sys.stdout.flush()
    for i in range(a.stderr_lines):
        print(f"{task} err {i}", file=sys.stderr, flush=True)
    for e in range(1, a.epochs + 1):
        metrics = {"loss": 1.0 / e, "accuracy": 0.5 + e / 100}
        if a.val_accuracy is not None:
            metrics["val_accuracy"] = a.val_accuracy if e == 1 else a.val_accuracy - 0.05
        print(json.dumps({"event": "epoch_end", "epoch": e, "epochs": a.epochs, "steps": 10,
                          "metrics": metrics,
                          "examples_per_sec": 100.0, "task": role()}), flush=True)
    for path in a.wait_file or []:
        while not os.path.exists(path):
            time.sleep(0.02)
    for i in range(a.lines_after):
        print(f"{task} after {i}", flush=True)
    deadline = time.time() + a.sleep
    while time.time() < deadline:
        time.sleep(min(0.05, max(0.0, deadline - time.time())))
    if a.message:
        print(a.message, flush=True)
    return a.exit


if __name__ == "__main__":
    sys.exit(main())
