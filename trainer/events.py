"""Structured progress lines on stdout, one JSON object per line, for the service.

  {"event": "train_start", ...}                              once, when the first epoch starts
  {"event": "epoch_end", "epoch": 1, "epochs": 5, "steps": 89,
   "metrics": {"loss": .., "accuracy": .., "val_loss": .., "val_accuracy": ..},
   "examples_per_sec": 812.3, "seconds": 7.0, "task": "chief:0"}  per finished epoch
  {"event": "evaluation", "epoch": 3, "metrics": {...}, ...} evaluator, per checkpoint
  {"event": "train_end", "model_dir": ..., ...}              once, at the end

Every line is flushed at once: replica logs are read while the job runs.
Only the chief (and the evaluator, for its own lines) prints them; when a
hyperparameter-tuning trial id is known every line carries "trial".

stdout is the progress channel only: `claim_stdout` points file descriptor 1
and sys.stdout at stderr, so whatever else prints (Keras' "Downloading data
from ...", libraries writing to fd 1) lands in stderr, and only `emit` writes
to the original stdout. Pure Python: the entry claims stdout before TensorFlow
is imported.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import IO, Any

_out: IO[str] | None = None
_common: dict[str, Any] = {}


def claim_stdout() -> None:
    """Keep the real stdout for progress lines; send everything else to stderr."""
    global _out
    if _out is not None:
        return
    sys.stdout.flush()
    _out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def set_common_fields(**fields: Any) -> None:
    """Fields every later line carries (None values are left out)."""
    _common.clear()
    _common.update({k: v for k, v in fields.items() if v is not None})


def _jsonable(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    # NaN and infinities are not JSON; a diverged loss shows up as null.
    return number if math.isfinite(number) else None


def metrics_dict(logs: dict[str, Any] | None) -> dict[str, Any]:
    return {k: _jsonable(v) for k, v in sorted((logs or {}).items())}


def emit(event: str, task: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields, **_common, "task": task}, allow_nan=False)
    out = _out or sys.stdout
    out.write(line + "\n")
    out.flush()


def note(message: str) -> None:
    """A human-readable line for the replica's log (stderr)."""
    print(f"trainer: {message}", file=sys.stderr, flush=True)
