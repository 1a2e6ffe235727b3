"""scheduling/across.py: one pass over several backends, for jobs that accept more than one
(issue 52.1). Pure: plain values in, each backend's decision out."""
from __future__ import annotations

from service.scheduling.across import Side, across
from service.scheduling.model import Running, Share, Waiting


def _w(job: str, team: str = "a", core: int = 1, at: float = 0.0) -> Waiting[str]:
    return Waiting(job_id=job, team=team, priority=0, demand={"core": core}, queued_at=at)


def _r(job: str, team: str = "a", core: int = 1) -> Running[str]:
    return Running(job_id=job, team=team, priority=0, demand={"core": core}, started_at=0.0)


def _admitted(result, name: str) -> list[str]:
    return [a.job_id for a in result.decisions[name].admit]


def test_the_most_preferred_that_admits_it():
    j = _w("j")
    result = across([Side("x", {"core": 2}, {}, [], [j]), Side("y", {"core": 2}, {}, [], [j])],
                    {"j": ["y", "x"]}, 10.0)
    assert _admitted(result, "y") == ["j"] and _admitted(result, "x") == []
    assert result.placed == {"j": "y"}
    assert result.why["j"] == "y: admitted, 2 of 2 core free; x: 2 of 2 core free"


def test_else_the_first_that_frees():
    j = _w("j")
    result = across([Side("x", {"core": 1}, {}, [_r("busy")], [j]), Side("y", {"core": 1}, {}, [], [j])],
                    {"j": ["x", "y"]}, 10.0)
    assert result.placed == {"j": "y"} and _admitted(result, "y") == ["j"] and _admitted(result, "x") == []
    assert result.why["j"] == "x: 0 of 1 core free; y: admitted, 1 of 1 core free"


def test_a_job_placed_elsewhere_leaves_its_room_to_the_next():
    # j is the oldest on y too, but goes to x (preferred): y's one core is k's, in the same pass.
    j, k = _w("j", at=1.0), _w("k", at=2.0)
    result = across([Side("x", {"core": 1}, {}, [], [j]), Side("y", {"core": 1}, {}, [], [j, k])],
                    {"j": ["x", "y"]}, 10.0)
    assert _admitted(result, "x") == ["j"] and _admitted(result, "y") == ["k"]


def test_never_admitted_twice_and_capacity_kept_on_each():
    jobs = [_w(f"j{i}", team="ab"[i % 2], at=float(i)) for i in range(8)]
    sides = [Side("x", {"core": 3}, {}, [_r("rx")], jobs), Side("y", {"core": 2}, {}, [], jobs),
             Side("z", {"core": 4}, {}, [_r("rz", core=2)], jobs[4:])]
    accepts = {w.job_id: (["z", "x", "y"] if i >= 4 else ["y", "x"]) for i, w in enumerate(jobs)}
    result = across(sides, accepts, 10.0)
    admitted = [j for s in sides for j in _admitted(result, s.name)]
    assert len(admitted) == len(set(admitted)) == 2 + 2 + 2, result.decisions
    for s in sides:
        held = sum(r.demand["core"] for r in s.running) + len(_admitted(result, s.name))
        assert held <= s.capacity["core"], s.name
    assert all(result.placed[j] in accepts[j] for j in admitted)


def test_a_team_inside_its_nominal_quota_still_reclaims_there():
    # Team b owns y's core; a borrowed it. b's job accepts x and y; x is full of a's work too:
    # on y, b reclaims its quota (a preemption for it), and nothing is admitted twice.
    shares = {"b": Share(nominal={"core": 1})}
    j = _w("j", team="b")
    result = across([Side("x", {"core": 1}, {}, [_r("ax")], [j]), Side("y", {"core": 1}, shares, [_r("ay")], [j])],
                    {"j": ["x", "y"]}, 10.0)
    assert [(p.job_id, p.for_job) for p in result.decisions["y"].preempt] == [("ay", "j")]
    assert result.decisions["x"].preempt == [] and result.placed == {"j": "y"}
    assert result.why["j"].endswith("y: preempting for it, 0 of 1 core free")


def test_a_job_of_one_backend_is_decided_as_before():
    j = _w("j")
    result = across([Side("x", {"core": 1}, {}, [], [j])], {}, 10.0)
    assert _admitted(result, "x") == ["j"] and result.placed == {} and result.why == {}
