"""A stand-in for a training task on Slurm, for the slurm backend's tests (standard library only).

Prints who it is (from TF_CONFIG, as the trainer reads it), optionally dumps its env,
waits for a file, sleeps, and exits with the code it is given."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def attack(run: str, me: str) -> None:
    """What hostile code in a task would try: swap its log for a link to a file of the host's, write
    the launcher's input, plant a record for another task. Each line says what happened."""
    tries = {
        "unlink-log": lambda: os.unlink(os.path.join(run, "logs", "workerpool0-0.log")),
        "link-log": lambda: os.symlink("/etc/shadow", os.path.join(run, "logs", "evil.log")),
        "write-job": lambda: open(os.path.join(run, "job.json"), "a").write("x"),
        "write-launcher": lambda: open(os.path.join(run, "launcher.py"), "a").write("x"),
        "new-record": lambda: open(os.path.join(run, "tasks", "evil.exit"), "w").write("{}"),
    }
    for name, do in tries.items():
        try:
            do()
            print(f"attack {name}: done", flush=True)
        except OSError as e:
            print(f"attack {name}: refused ({e.strerror})", flush=True)


def cross_attack(run: str) -> None:
    """What a task of one team would try on another team's running job: forge its progress,
    its exit record and its output, read its commands. Each line says what happened."""
    tries = {
        "append-log": lambda: open(os.path.join(run, "logs", "workerpool0-0.log"), "a").write(
            "2026-01-01T00:00:00.000000Z stdout FORGED epoch=99 loss=0.0 accuracy=1.0\n"),
        "write-exit": lambda: open(os.path.join(run, "tasks", "workerpool0-0.exit"), "w").write(
            '{"exit_code": 1, "signal": null, "error": "FORGED"}'),
        "plant-output": lambda: open(os.path.join(run, "output", "FORGED"), "w").write("x"),
        "read-job": lambda: open(os.path.join(run, "job.json")).read(),
        "list-run": lambda: os.listdir(run),
    }
    for name, do in tries.items():
        try:
            do()
            print(f"cross {name}: done", flush=True)
        except OSError as e:
            print(f"cross {name}: refused ({e.strerror})", flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dump-env", help="write os.environ as JSON to DIR/<role>-<index>.json")
    p.add_argument("--lines", type=int, default=1)
    p.add_argument("--wait-file", help="wait until this file exists")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--attack", help="the job's run folder: try to forge this task's records there")
    p.add_argument("--cross-attack", help="another team's run folder: try to forge its records there")
    p.add_argument("--on-term", help="on SIGTERM, append a line to this file and go on (a task that needs the KILL)")
    p.add_argument("--checkpoint", action="store_true",
                   help="resume from AIP_CHECKPOINT_DIR/ckpt if an earlier run left it, else write it")
    p.add_argument("--save-on-term", action="store_true",
                   help="on SIGTERM, save checkpoint step-9 and exit 143, as the packaged trainer does")
    a = p.parse_args()
    if a.save_on_term:
        def _save(_signum, _frame):
            ckpt = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "ckpt")
            os.makedirs(os.path.dirname(ckpt), exist_ok=True)
            with open(ckpt, "w") as f:
                f.write("step-9")
            print("saved checkpoint step-9 on SIGTERM; exiting", flush=True)
            os._exit(143)
        signal.signal(signal.SIGTERM, _save)
    if a.on_term:
        def _term(_signum, _frame):
            with open(a.on_term, "a") as f:
                f.write(f"TERM {os.getpid()}\n")
        signal.signal(signal.SIGTERM, _term)
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    me = f"{task.get('type', 'chief')}-{task.get('index', 0)}"
    if a.dump_env:
        # Also under the Slurm job's id: attempts of one job write apart.
        for name in (f"{me}.json", f"{me}-{os.environ.get('TRAINJOBS_SLURM_JOB_ID')}.json"):
            with open(os.path.join(a.dump_env, name), "w") as f:
                json.dump(dict(os.environ), f)
    print(f"hello from {me} on {os.environ.get('TRAINJOBS_SLURM_NODE')} as uid {os.getuid()}", flush=True)
    for i in range(a.lines - 1):
        print(f"{me} line {i}", flush=True)
    if a.checkpoint:
        ckpt = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "ckpt")
        if os.path.exists(ckpt):
            print(f"{me} resumed from checkpoint {open(ckpt).read()} (Slurm restart "
                  f"{os.environ.get('TRAINJOBS_SLURM_RESTART_COUNT')})", flush=True)
        else:
            os.makedirs(os.path.dirname(ckpt), exist_ok=True)
            with open(ckpt, "w") as f:
                f.write("step-7")
            print(f"{me} saved checkpoint step-7", flush=True)
    if a.attack:
        attack(a.attack, me)
    if a.cross_attack:
        cross_attack(a.cross_attack)
    if a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.05)
    if a.sleep:
        time.sleep(a.sleep)
    if a.exit:
        print(f"{me} exiting with {a.exit}", file=sys.stderr, flush=True)
    return a.exit


if __name__ == "__main__":
    sys.exit(main())
