"""A stand-in for a training replica that a preemption stops: standard library only.

It counts steps while it waits for --release (then exits 0). On SIGTERM it does what the
packaged trainer does (docs/trainer.md): saves its step (--state-dir/step), says so on its log
(the trainer's `preempted` event), and exits 143; --hold FILE makes it wait for FILE first (a
slow save). A new attempt starts from the saved step (the `train_start` event's initial_step)."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def put(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)   # the next attempt may run as another uid (the sandbox's umask is 077)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--state-dir", required=True)
    p.add_argument("--release", required=True)
    p.add_argument("--hold")
    a = p.parse_args()
    saved = os.path.join(a.state_dir, "step")
    start = int(open(saved).read()) if os.path.exists(saved) else 0
    step = start + 1
    print(json.dumps({"event": "train_start", "epochs": 2, "initial_epoch": 1, "initial_step": start}), flush=True)

    def on_term(*_):
        put(os.path.join(a.state_dir, f"sigterm-{start}"), str(step))
        if a.hold:
            while not os.path.exists(a.hold):
                time.sleep(0.02)
        put(saved, str(step))
        print(json.dumps({"event": "preempted", "epoch": 1, "step": step}), flush=True)
        os._exit(143)

    signal.signal(signal.SIGTERM, on_term)
    put(os.path.join(a.state_dir, f"started-{start}"), str(os.getpid()))
    while not os.path.exists(a.release):
        step += 1
        time.sleep(0.02)
    print(json.dumps({"event": "train_end"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
