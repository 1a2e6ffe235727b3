"""The median stopping rule, alone (service.sweeps.early_stop) and on real local trials."""
from __future__ import annotations

import uuid

from service.sweeps.early_stop import laggards
from tests.sweeps.helpers import create, get, template
from tests.waiting import wait_for

A, B, C, D = (uuid.UUID(int=i) for i in range(1, 5))


def _stopped(curves, running, goal="maximize", min_epochs=2, min_trials=2):
    return [v.job_id for v in laggards(curves, running, metric="m", goal=goal, min_epochs=min_epochs,
                                       min_trials=min_trials)]


def test_a_trial_behind_the_median_at_its_epoch_is_stopped():
    done = {A: [(1, 0.5), (2, 0.6), (3, 0.7)], B: [(1, 0.4), (2, 0.5), (3, 0.9)]}
    assert _stopped({**done, C: [(1, 0.1), (2, 0.2)]}, {C}) == [C]
    # Judged at its own epoch: the others' best by epoch 2 (0.6 and 0.5, median 0.55).
    assert _stopped({**done, C: [(1, 0.1), (2, 0.56)]}, {C}) == []
    assert _stopped({**done, C: [(1, 0.1)]}, {C}) == []                     # before min_epochs
    assert _stopped({**done, C: [(1, 0.1), (2, 0.2)]}, {C}, min_trials=3) == []   # too few to compare with
    assert _stopped({**done, C: [(1, 0.1), (2, 0.2)]}, set()) == []         # only running trials are stopped
    # Minimizing, a loss above the median is behind.
    assert _stopped({**done, C: [(1, 0.9), (2, 0.8)]}, {C}, goal="minimize") == [C]
    # Trials that have not reached the epoch do not count.
    assert _stopped({A: [(1, 0.9)], B: [(1, 0.9)], C: [(1, 0.1), (2, 0.2)]}, {C}) == []


def test_a_sweep_stops_a_trial_clearly_behind(make_client, work_dir, tmp_path):
    gates = tmp_path / "gates"
    gates.mkdir()
    gates.chmod(0o755)
    for acc in ("0.9", "0.8", "0.7"):
        (gates / f"go-{acc}").touch()
    api = make_client(sweep_interval_seconds=0.2)
    r = api.c.post("/v1/templates", json=template(["--wait-file", f"{gates}/go-${{acc}}"]))
    assert r.status_code == 201, r.text
    sweep = create(api.c, parameters={"acc": {"values": [0.9, 0.8, 0.7, 0.1, 0.95]}}, max_parallel=5,
                   early_stopping={"min_epochs": 2, "min_trials": 3})
    assert sweep["search"]["early_stopping"] == {"rule": "median", "min_epochs": 2, "min_trials": 3}

    def trial(s, n):
        return next(t for t in s["trials"] if t["number"] == n)

    def judged():
        s = get(api.c, sweep["id"])
        return s if trial(s, 4)["state"] == "CANCELLED" and trial(s, 5)["last_value"] is not None else None
    now = wait_for(judged, "trial 4 (val_accuracy 0.1) to be stopped and trial 5 to reach epoch 2", 120)
    assert trial(now, 4)["stopped_early"].startswith("stopped early: best val_accuracy 0.1 by epoch 2 is below")
    # Trial 5, ahead of the median, is judged on every pass and runs on until its gate opens.
    launcher = api.c.app.state.controller.services["sweeps"]
    passes = launcher.passes
    wait_for(lambda: launcher.passes >= passes + 3, "three more sweep passes")
    now = get(api.c, sweep["id"])
    assert trial(now, 5)["state"] == "RUNNING" and trial(now, 5)["stopped_early"] is None
    (gates / "go-0.95").touch()
    done = wait_for(lambda: (s := get(api.c, sweep["id"]))["state"] != "RUNNING" and s, "the sweep to end", 120)
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"SUCCEEDED": 4, "CANCELLED": 1}
    assert done["best"]["number"] == 5
