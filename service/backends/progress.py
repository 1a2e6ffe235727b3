"""The trainer's structured progress lines (trainer/progress.py) -> job.progress,
for every backend: the local backend reads them from the replicas' log files, the
vertex backend from Cloud Logging.

The chief's `epoch_end` lines give the latest epoch, steps and metrics (with
MultiWorkerMirroredStrategy every worker reports the same numbers, so the
chief speaks for the job); the evaluator's `evaluation` lines are kept beside
them; `train_start` and `train_end` mark the phase."""
from __future__ import annotations

import json
import math

_KEEP_EPOCH = ("epoch", "epochs", "steps", "metrics", "examples_per_sec", "seconds", "task")
# Several epochs may end between two polls and only the last progress is reported, so
# the last few epoch records ride along for the epoch history (service/jobs/epochs.py).
RECENT_EPOCHS = 20
_RECENT_FIELDS = ("epoch", "steps", "seconds", "metrics")


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53


def update(progress: dict | None, message: str, timestamp: str, tf_role: str | None) -> dict | None:
    """The progress after one log message, or None if the message says nothing new."""
    if not message.startswith("{") or '"event"' not in message:
        return None
    try:
        # NaN, Infinity and 1e999 become null: PostgreSQL's json type refuses them.
        event = json.loads(message, parse_float=_finite, parse_constant=lambda _: None)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict):
        return None
    kind = event.get("event")
    out = dict(progress or {})
    if tf_role == "evaluator":
        if kind != "evaluation":
            return None
        out["evaluation"] = {k: v for k, v in event.items() if k != "event"}
        out["evaluation"]["at"] = timestamp
    elif kind == "train_start":
        out.setdefault("phase", "training")
        if "epochs" in event:
            out.setdefault("epochs", event["epochs"])
        # BackupAndRestore restored a checkpoint (a retry attempt, a restarted replica):
        # the view says which epoch training went on from.
        # A preempted attempt saved mid-epoch: initial_step says which step it goes on from.
        initial, given = event.get("initial_epoch"), event.get("initial_step")
        step = given if isinstance(given, int) and _count(given) else 0
        if isinstance(initial, int) and _count(initial) and (initial > 1 or step > 0):
            out["resumed_at_epoch"] = initial
            if step:
                out["resumed_at_step"] = step
    elif kind == "preempted":
        # The trainer saved at this step on SIGTERM (trainer/preemption.py): the work kept.
        out["preempted_at"] = {k: event[k] for k in ("epoch", "step", "global_step") if _count(event.get(k))}
        out["preempted_at"]["at"] = timestamp
    elif kind == "epoch_end":
        out.update({k: event[k] for k in _KEEP_EPOCH if k in event})
        out["phase"] = "training"
        record = {k: event[k] for k in _RECENT_FIELDS if k in event}
        out["recent_epochs"] = [*(out.get("recent_epochs") or [])[-(RECENT_EPOCHS - 1):],
                                {**record, "at": timestamp}]
    elif kind == "train_end":
        out["phase"] = "finished"
        if "model_dir" in event:
            out["model_dir"] = event["model_dir"]
    else:
        return None
    out["updated_at"] = timestamp
    return out
