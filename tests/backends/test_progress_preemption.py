"""What the trainer's preemption lines (trainer/preemption.py) become in a job's progress: the
step a preempted attempt saved at, and the step the next attempt goes on from."""
import json

from service.backends import progress


def line(**fields):
    return json.dumps(fields)


def test_a_preemption_and_the_resume_from_its_step():
    p = progress.update(None, line(event="preempted", epoch=2, step=57, global_step=207, task="chief:0"), "t1", "chief")
    assert p["preempted_at"] == {"epoch": 2, "step": 57, "global_step": 207, "at": "t1"}
    p = progress.update(p, line(event="train_start", epochs=3, initial_epoch=2, initial_step=57), "t2", "chief")
    assert (p["resumed_at_epoch"], p["resumed_at_step"]) == (2, 57)


def test_a_resume_inside_the_first_epoch_is_a_resume_too():
    p = progress.update(None, line(event="train_start", epochs=3, initial_epoch=1, initial_step=12), "t", "chief")
    assert (p["resumed_at_epoch"], p["resumed_at_step"]) == (1, 12)
    fresh = progress.update(None, line(event="train_start", epochs=3, initial_epoch=1, initial_step=0), "t", "chief")
    assert "resumed_at_epoch" not in fresh and "resumed_at_step" not in fresh


def test_hostile_step_numbers_are_dropped():
    p = progress.update(None, line(event="preempted", epoch=True, step=-3, global_step=10**30), "t", "chief")
    assert p["preempted_at"] == {"at": "t"}
    p = progress.update(None, line(event="train_start", initial_epoch=2, initial_step="7"), "t", "chief")
    assert p["resumed_at_epoch"] == 2 and "resumed_at_step" not in p
