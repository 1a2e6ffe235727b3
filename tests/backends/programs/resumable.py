"""A stand-in for a trainer that resumes from its output folder (issue 52.5): standard library only.

It reads its checkpoint folder from AIP_CHECKPOINT_DIR, as the trainer does. Finding
`checkpoint.json` there, it prints `RESUMED <what the earlier attempt saved>` and exits 0.
Else it saves one (its uid and the backend's marks: the Slurm job id, if any), prints `SAVED`,
and runs until SIGTERM (a preemption), then exits 143.

--peek DIR: hostile code instead: it tries to list DIR, read DIR/checkpoints/checkpoint.json and
write DIR/FORGED (another job's folder in the shared output folder), and to list DIR's parent (the
shared folder), and prints each outcome."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def peek(folder: str) -> int:
    tries = {
        "list": lambda: os.listdir(folder),
        "read": lambda: open(os.path.join(folder, "checkpoints", "checkpoint.json")).read(),
        "write": lambda: open(os.path.join(folder, "FORGED"), "w").write("x"),
    }
    for name, do in tries.items():
        try:
            do()
            print(f"peek {name}: done", flush=True)
        except OSError as e:
            print(f"peek {name}: refused ({e.strerror})", flush=True)
    try:   # what it can see of the shared folder: its own job's folder at most
        print(f"peek root: {json.dumps(sorted(os.listdir(os.path.dirname(folder))))}", flush=True)
    except OSError as e:
        print(f"peek root: refused ({e.strerror})", flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--peek")
    a = p.parse_args()
    if a.peek:
        return peek(a.peek)
    folder = os.environ["AIP_CHECKPOINT_DIR"]
    saved = os.path.join(folder, "checkpoint.json")
    if os.path.exists(saved):
        print("RESUMED " + open(saved).read(), flush=True)
        return 0
    os.makedirs(folder, exist_ok=True)
    with open(saved, "w") as f:
        f.write(json.dumps({"uid": os.getuid(), "slurm_job": os.environ.get("TRAINJOBS_SLURM_JOB_ID")}))
    print("SAVED " + folder, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    deadline = time.monotonic() + 600   # a test that forgets it: gone in ten minutes
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return 1


if __name__ == "__main__":
    sys.exit(main())
