"""The queue's places are the predicted start order (issue 49.1, 49.2): the scheduler played
forward over expected durations, not one pass's standings."""
from __future__ import annotations

from service.scheduling.forecast import explained, play_forward
from service.scheduling.model import Policy, Running, Share, Waiting
from service.scheduling.scheduler import schedule

CAP = {"core": 2}
SHARES = {"b": Share(nominal={"core": 1})}


def _world():
    # Team b runs two short jobs (one borrowed) while team a queues 8 long ones; then b queues one more.
    running = [Running("b1", "b", 0, {"core": 1}, 0.0, expected_end=3600.0, likely_end=10.0),
               Running("b2", "b", 0, {"core": 1}, 1.0, expected_end=3601.0, likely_end=20.0)]
    waiting = [Waiting(f"a{i}", "a", 0, {"core": 1}, float(i), duration=100.0) for i in range(1, 9)]
    waiting.append(Waiting("b3", "b", 0, {"core": 1}, 9.0, duration=10.0))
    return running, waiting


def test_a_place_is_the_predicted_start_order_not_todays_standings():
    running, waiting = _world()
    now = 5.0
    standings = schedule(CAP, SHARES, running, waiting, now)
    assert {q.job_id: q.position for q in standings.queue}["b3"] == 9      # what the page used to say
    d = explained(CAP, SHARES, running, waiting, now, Policy(), served={})
    places = {q.job_id: q for q in d.queue}
    # b1 ends at 10: a1 starts (team a holds nothing); b2 ends at 20: team b now holds nothing, a1
    # holds a core: b3 goes before a2.
    assert [q.job_id for q in d.queue][:3] == ["a1", "b3", "a2"]
    assert (places["b3"].position, places["b3"].ahead) == (2, 1) and places["b3"].why.endswith("1 job ahead")
    assert (places["a1"].likely_start, places["b3"].likely_start, places["a2"].likely_start) == (10.0, 20.0, 30.0)
    # At the latest: the running jobs to their time limits (3600 s).
    assert places["a1"].estimated_start == 3600.0 and places["b3"].estimated_start >= places["b3"].likely_start


def test_the_play_stops_where_nothing_known_ends():
    running = [Running("r", "a", 0, {"core": 2}, 0.0)]              # no time limit, no history
    waiting = [Waiting("w", "b", 0, {"core": 1}, 1.0, duration=5.0)]
    fc = play_forward(CAP, {}, running, waiting, 2.0, Policy(), served={})
    assert fc.order == [] and fc.likely == {}
    d = explained(CAP, {}, running, waiting, 2.0, Policy(), served={})
    assert [(q.job_id, q.position, q.likely_start, q.estimated_start) for q in d.queue] == [("w", 1, None, None)]


def test_a_preempted_job_comes_back_to_the_play_with_what_it_still_had_to_run():
    shares = {"b": Share(nominal={"core": 2})}
    running = [Running("a1", "a", 0, {"core": 2}, 0.0, likely_end=1000.0)]        # borrowed: all of b's quota
    waiting = [Waiting("b1", "b", 0, {"core": 2}, 5.0, duration=50.0)]
    fc = play_forward(CAP, shares, running, waiting, 10.0, Policy(grace_s=30.0), served={})
    assert fc.order == ["b1"] and fc.likely["b1"] == 40.0          # a1 preempted at 10, stopped by 40


def test_ends_between_two_passes_free_their_capacity_together():
    """The controller sees ends at its passes: two cores freed 0.2 s apart are free together at
    the next pass, so the 2-core job waiting longest is not overtaken by a younger 1-core one
    (bench/forecast.py found tau 0.71-0.78 with 2-core jobs before this)."""
    running = [Running("r1", "c", 0, {"core": 1}, 0.0, likely_end=10.1),
               Running("r2", "c", 0, {"core": 1}, 0.0, likely_end=10.3)]
    waiting = [Waiting("big", "a", 0, {"core": 2}, 1.0, duration=5.0),
               Waiting("small", "b", 0, {"core": 1}, 2.0, duration=5.0)]
    fc = play_forward(CAP, {}, running, waiting, 0.0, Policy(pass_s=0.5), served={})
    # big ends just after 15.5 (launched during the pass at 10.5): small starts at the pass after.
    assert fc.order == ["big", "small"] and fc.likely["big"] == 10.5 and fc.likely["small"] == 16.0
    ticked_not = play_forward(CAP, {}, running, waiting, 0.0, Policy(reservations=0), served={})
    assert ticked_not.order == ["small", "big"]      # one end at a time, nothing kept: what the play used to say


def test_the_play_counts_a_pass_from_an_end_to_the_start_it_makes_room_for():
    """A job the play starts on a pass is launched during it, so its end, a whole number of
    passes later, falls just after a tick and is seen on the next: the play had the next job
    start on the very tick, a pass early each time, and ran chains ahead of the running jobs."""
    running = [Running("r", "c", 0, {"core": 1}, 0.0, likely_end=0.3), Running("x", "c", 0, {"core": 1}, 0.0)]
    waiting = [Waiting(f"w{i}", "a", 0, {"core": 1}, float(i), duration=2.0) for i in range(3)]
    fc = play_forward(CAP, {}, running, waiting, 0.0, Policy(pass_s=0.5), served={})
    assert [fc.likely[w] for w in ("w0", "w1", "w2")] == [0.5, 3.0, 5.5]     # were 0.5, 2.5, 4.5
    unticked = play_forward(CAP, {}, running, waiting, 0.0, Policy(), served={})
    assert [unticked.likely[w] for w in ("w0", "w1", "w2")] == [0.3, 2.3, 4.3]   # no passes: no gap


def test_at_the_latest_plays_every_job_to_its_time_limit():
    running = [Running("r", "a", 0, {"core": 2}, 0.0, expected_end=100.0, likely_end=10.0)]
    waiting = [Waiting("w1", "b", 0, {"core": 2}, 1.0, duration=5.0, limit=50.0),
               Waiting("w2", "b", 0, {"core": 2}, 2.0, duration=5.0, limit=50.0)]
    d = explained(CAP, {}, running, waiting, 0.0, Policy(), served={})
    got = {q.job_id: (q.likely_start, q.estimated_start) for q in d.queue}
    assert got == {"w1": (10.0, 100.0), "w2": (15.0, 150.0)}     # the walk used to give w2 no latest at all
