"""A stand-in for the trainer in the UI's tests: prints trainer-style progress
lines (trainer/progress.py) and a few log lines, in well under a second.
Standard library only."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--wait-file", help="wait until this file exists before training")
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--stderr-demo", action="store_true",
                   help="print on stderr what TensorFlow does: INFO, a warning, a caught traceback")
    a = p.parse_args()
    task = os.environ.get("TRAINJOBS_LOCAL_REPLICA", "?/?").split("/", 1)[1]
    tf = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    role = f"{tf.get('type', 'chief')}:{tf.get('index', 0)}"
    print(f"hello from {task} as {role}", flush=True)
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    if a.stderr_demo:
        for line in ("2026-11-25 10:00:00.000001: I tensorflow/core/platform/cpu_feature_guard.cc:210] "
                     "healthy info on stderr",
                     "WARNING:tensorflow:a warning on stderr",
                     "Traceback (most recent call last):",
                     '  File "train.py", line 3, in <module>',
                     "    main()",
                     "ValueError: a caught error on stderr"):
            print(line, file=sys.stderr, flush=True)
    print(json.dumps({"event": "train_start", "epochs": a.epochs, "task": role}), flush=True)
    for e in range(1, a.epochs + 1):
        print(json.dumps({"event": "epoch_end", "epoch": e, "epochs": a.epochs, "steps": 10, "seconds": 0.01,
                          "metrics": {"loss": round(1.0 / e, 4), "accuracy": 0.5 + e / 20,
                                      "val_loss": round(1.2 / e, 4), "val_accuracy": 0.45 + e / 20},
                          "examples_per_sec": 1000.0, "task": role}), flush=True)
        print(f"{task}: epoch {e} done", flush=True)
    if a.exit:
        print(f"{task}: giving up with exit code {a.exit}", file=sys.stderr, flush=True)
        return a.exit
    print(json.dumps({"event": "train_end", "task": role}), flush=True)
    print(f"{task}: training finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
