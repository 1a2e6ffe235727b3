"""Fair share remembers (issue 52.3): a team that used much lately yields to one that used little,
through the pure scheduler (Ledger.fair_key's past), with no history exactly as before; and the
guarantee (a nominal quota) still comes first."""
from __future__ import annotations

from service.scheduling.ledger import Ledger
from service.scheduling.model import SLOT, Running, Share, Waiting
from service.scheduling.scheduler import schedule

NOW = 500.0     # every job waited less than the starvation limit (fair share decides)


def _waiting(team: str, n: int, queued_at: float, demand=None) -> list[Waiting]:
    return [Waiting(f"{team}-{i}", team, 0, dict(demand or {"core": 1}), queued_at + i) for i in range(n)]


def _admitted(decision) -> list[str]:
    return [str(a.job_id) for a in decision.admit]


def test_with_one_slot_the_team_with_yesterdays_use_yields():
    """No capacity set, one launch slot, alpha's job older: alpha goes first with no history (as
    issue 47's defaults), zulu goes first when alpha used much yesterday."""
    waiting = _waiting("alpha", 1, 100.0, {SLOT: 1}) + _waiting("zulu", 1, 200.0, {SLOT: 1})
    assert _admitted(schedule({SLOT: 1}, {}, [], waiting, NOW)) == ["alpha-0"]
    assert _admitted(schedule({SLOT: 1}, {}, [], waiting, NOW, usage={})) == ["alpha-0"]
    assert _admitted(schedule({SLOT: 1}, {}, [], waiting, NOW, usage={"alpha": 0.0})) == ["alpha-0"]
    assert _admitted(schedule({SLOT: 1}, {}, [], waiting, NOW, usage={"alpha": 500.0})) == ["zulu-0"]


def test_decayed_use_is_weighed_against_what_teams_hold_now():
    """4 cores, both teams wait with 4 one-core jobs. alpha's part of the decayed use is 3/4, zulu's
    1/4: zulu goes first until what it holds now (2 of 4 cores: 0.5) plus its past (0.25) reaches
    alpha's past (0.75); then the fewer jobs running; so zulu gets 3 cores, alpha 1."""
    waiting = _waiting("alpha", 4, 100.0) + _waiting("zulu", 4, 200.0)
    d = schedule({"core": 4}, {}, [], waiting, NOW, usage={"alpha": 300.0, "zulu": 100.0})
    teams = [j.split("-")[0] for j in _admitted(d)]
    assert sorted(teams) == ["alpha", "zulu", "zulu", "zulu"] and teams[:2] == ["zulu", "zulu"]
    without = [j.split("-")[0] for j in _admitted(schedule({"core": 4}, {}, [], waiting, NOW))]
    assert sorted(without) == ["alpha", "alpha", "zulu", "zulu"] and without[0] == "alpha"


def test_the_weight_divides_the_past_too():
    """alpha used twice zulu's but weighs 2: they stand alike, and the older job goes first."""
    waiting = _waiting("alpha", 1, 100.0, {SLOT: 1}) + _waiting("zulu", 1, 50.0, {SLOT: 1})
    shares = {"alpha": Share(weight=2.0)}
    assert _admitted(schedule({SLOT: 1}, shares, [], waiting, NOW, usage={"alpha": 200.0, "zulu": 100.0})) == ["zulu-0"]
    ledger = Ledger({SLOT: 1}, shares, [], {"alpha": 200.0, "zulu": 100.0})
    assert ledger.fair_key("alpha") == ledger.fair_key("zulu") == (1 / 3, 1 / 3, 0.0)


def test_a_nominal_quota_comes_back_whatever_the_teams_past():
    """The guarantee is not fair share: alpha, inside its nominal quota, reclaims its cores from
    zulu's borrowed jobs even though alpha used everything lately."""
    running = [Running(f"zulu-r{i}", "zulu", 0, {"core": 1}, 0.0) for i in range(4)]
    shares = {"alpha": Share(nominal={"core": 2})}
    d = schedule({"core": 4}, shares, running, _waiting("alpha", 2, 100.0), NOW, usage={"alpha": 1e6})
    assert len(d.preempt) == 2 and {str(p.for_job) for p in d.preempt} == {"alpha-0", "alpha-1"}


def test_a_figure_that_is_not_finite_counts_as_none():
    """Orders must stay comparable: an infinite or NaN figure is left out, never a NaN key."""
    ledger = Ledger({SLOT: 1}, {}, [], {"a": float("inf"), "b": float("nan"), "c": 2.0, "d": -1.0})
    assert ledger.past == {"c": 1.0}
    assert Ledger({SLOT: 1}, {}, [], {"a": 1e308, "c": 1e308}).past == {}   # their sum overflows
