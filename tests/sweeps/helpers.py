"""A template whose trials are programs/replica.py, and ways to drive a sweep."""
from __future__ import annotations

from tests.backends.localkit import spec

PARAMETERS = [
    {"name": "acc", "type": "float", "minimum": 0, "maximum": 1, "default": 0.5},
    {"name": "lr", "type": "float", "minimum": 0.00001, "maximum": 1, "default": 0.01},
    {"name": "units", "type": "int", "minimum": 1, "maximum": 512, "default": 16},
    {"name": "opt", "type": "string", "choices": ["adam", "sgd"], "default": "adam"},
    {"name": "shuffle", "type": "bool", "default": True},
    {"name": "epochs", "type": "int", "minimum": 1, "maximum": 10, "default": 2},
]
# Every parameter reaches the program's command line, so a wrong value would show.
ARGS = ["--epochs", "${epochs}", "--val-accuracy", "${acc}", "--message", "lr=${lr} units=${units} opt=${opt} "
        "shuffle=${shuffle}"]


def template(chief_extra: list[str] | None = None, *, workers: list[str] | None = None, **spec_kw) -> dict:
    return {"name": "sweepable", "parameters": PARAMETERS,
            "spec": spec(ARGS + (chief_extra or []), workers=workers, **spec_kw)}


def sweep_body(**kw) -> dict:
    body = {"template": "sweepable", "algorithm": "grid", "parameters": {"acc": {"values": [0.1, 0.2]}},
            "max_parallel": 1, "objective": {"metric": "val_accuracy", "goal": "maximize"}}
    body.update(kw)
    return body


def create(c, **kw) -> dict:
    r = c.post("/v1/sweeps", json=sweep_body(**kw))
    assert r.status_code == 201, r.text
    return r.json()


def get(c, sweep_id: str) -> dict:
    r = c.get(f"/v1/sweeps/{sweep_id}")
    assert r.status_code == 200, r.text
    return r.json()


def unfinished(sweep: dict) -> int:
    return sum(n for state, n in sweep["counts"].items()
               if state not in ("WAITING", "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED"))
