"""`trainjobs queue simulate` end to end: jobs as they happened in the database (SQLite and
PostgreSQL), the command as a process of its own, its report; a bad proposal; its bounds."""
from __future__ import annotations

import json
import re

from tests.whatif.whatkit import Past, seed, simulate

# Two teams, one core each way busy: four one-core jobs of 100 s submitted together an hour ago on
# a backend of 2 cores. Two started at once, two waited 100 s for them.
CROWDED = [Past("alpha", 3600, 0, 100), Past("alpha", 3600, 100, 100),
           Past("beta", 3600, 0, 100), Past("beta", 3600, 100, 100)]
TODAY = {"TRAINJOBS_CAPACITY": '{"sim": {"core": 2}}'}


def _team(report: dict, name: str) -> dict:
    return next(t for t in report["teams"] if t["team"] == name)


def test_doubling_the_capacity_takes_every_wait_to_zero(client, demo, db_url, tmp_path):
    seed(client, db_url, CROWDED)
    r = simulate(db_url, tmp_path, {"capacity": {"resources": {"core": 4}}}, "--days", "1", env=TODAY)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["jobs"] == 4 and report["proposed"]["capacity"] == {"core": 4}
    assert report["today"]["capacity"] == {"core": 2}
    for team in ("alpha", "beta"):
        t = _team(report, team)
        assert t["happened"] == {"p50_s": 0.0, "p90_s": 100.0, "not_started": 0}
        # as it is: each team gets one core (fair share), its second job waits for its first; a start
        # comes at the controller's next pass (TRAINJOBS_RECONCILE_INTERVAL_SECONDS, 0.5 s)
        assert t["today"]["p50_s"] <= 0.5 and 99.5 <= t["today"]["p90_s"] <= 100.5
        assert t["proposed"]["p90_s"] <= 0.5 and t["proposed"]["not_started"] == 0


def test_the_table_says_each_teams_waits_side_by_side(client, demo, db_url, tmp_path):
    seed(client, db_url, CROWDED + [Past("gamma", 7200, None, 10)])
    r = simulate(db_url, tmp_path, {"capacity": {"resources": {"core": 1}}}, "--days", "1", env=TODAY,
                 json_out=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "4 jobs" in lines[0] and "1 never started, left out" in lines[0]
    assert lines[1].startswith("  today:    capacity 2 core") and lines[2].startswith("  proposed: capacity 1 core")
    head = re.split(r"\s{2,}", lines[4])
    assert head[:3] == ["TEAM", "JOBS", "HAPPENED p50"]
    alpha = re.split(r"\s{2,}", lines[5])
    # with one core the four jobs run one after the other: alpha's second starts after 300 s or 200 s
    assert alpha[:4] == ["alpha", "2", "0s", "1m 40s"] and alpha[7] in ("3m 20s", "5m 00s", "3m 21s", "5m 01s")


def test_a_team_given_a_nominal_quota_takes_it_back_from_a_borrower(client, demo, db_url, tmp_path):
    """Beta's long job borrows the only core; alpha's job comes a minute later. Today alpha waits
    for the end (fair share keeps nothing for it); with a nominal core alpha preempts beta's job."""
    seed(client, db_url, [Past("beta", 7200, 0, 3000), Past("alpha", 7140, 2940, 60)])
    env = {"TRAINJOBS_CAPACITY": '{"sim": {"core": 1}}'}
    r = simulate(db_url, tmp_path, {"shares": {"alpha": {"nominal": {"core": 1}}}}, "--days", "1", env=env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert 2939 <= _team(report, "alpha")["today"]["p50_s"] <= 2941
    assert _team(report, "alpha")["proposed"]["p50_s"] <= 0.5
    assert _team(report, "beta")["proposed"]["p50_s"] <= 0.5     # it started first; the preemption came later


def test_a_bad_proposal_is_refused_saying_every_problem_and_nothing_is_replayed(client, demo, db_url, tmp_path):
    seed(client, db_url, CROWDED)
    bad = {"capacity": {"resources": {"core": "4"}}, "shares": {"alpha": {"weight": True, "nominal": {"core": 1},
                                                                          "lending_limit": {"core": 2}},
                                                                "Beta": None},
           "quota": 1}
    r = simulate(db_url, tmp_path, bad, "--days", "1", env=TODAY)
    assert r.returncode == 2 and r.stdout == ""
    said = r.stderr
    assert "proposal.json: not valid:" in said
    assert "capacity.resources.core: must be a whole number such as 4, not a string" in said
    assert "shares.alpha.weight: must be a number such as 1 or 0.5, not a boolean" in said
    assert "quota: unknown field (remove it)" in said
    assert "shares.Beta" in said


def test_a_proposal_the_api_would_refuse_is_refused_here(client, demo, db_url, tmp_path):
    seed(client, db_url, CROWDED)
    over = {"capacity": {"resources": {"core": 2}}, "shares": {"alpha": {"nominal": {"core": 2}},
                                                               "beta": {"nominal": {"core": 1},
                                                                        "lending_limit": {"core": 2}},
                                                               "nobody": None}}
    r = simulate(db_url, tmp_path, over, "--days", "1", env=TODAY)
    assert r.returncode == 2 and r.stdout == ""
    assert "the teams' nominal quotas of core add up to 3, more than the capacity's 2 (by 1)" in r.stderr
    assert "shares.beta.lending_limit.core: lends 2, more than its nominal quota of 1" in r.stderr
    assert "shares.nobody: no team 'nobody'" in r.stderr
    r = simulate(db_url, tmp_path, "{not json", "--days", "1", env=TODAY)
    assert r.returncode == 2 and "body: invalid JSON" in r.stderr


def test_the_bounds_are_kept(client, demo, db_url, tmp_path):
    seed(client, db_url, CROWDED)
    proposal = {"capacity": {"resources": {"core": 4}}}
    r = simulate(db_url, tmp_path, proposal, "--days", "8", env={**TODAY, "TRAINJOBS_SIMULATE_MAX_DAYS": "7"})
    assert r.returncode == 2 and "days: 8; from 1 to 7 (TRAINJOBS_SIMULATE_MAX_DAYS)" in r.stderr
    r = simulate(db_url, tmp_path, proposal, "--days", "1", env={**TODAY, "TRAINJOBS_SIMULATE_MAX_JOBS": "3"})
    assert r.returncode == 2 and "4 jobs on sim in the last 1 days; at most 3 (TRAINJOBS_SIMULATE_MAX_JOBS)" in r.stderr
    r = simulate(db_url, tmp_path, proposal, "--days", "1",
                 env={**TODAY, "TRAINJOBS_SIMULATE_MAX_SECONDS": "0.000001"})
    assert r.returncode == 2 and "CPU seconds (TRAINJOBS_SIMULATE_MAX_SECONDS)" in r.stderr
    r = simulate(db_url, tmp_path, proposal, "--days", "1", env={**TODAY, "TRAINJOBS_SIMULATE_MAX_SECONDS": "0"})
    assert r.returncode == 2 and "TRAINJOBS_SIMULATE_MAX_SECONDS" in r.stderr   # a bad setting, refused by name
    r = simulate(db_url, tmp_path, "{" + " " * 2048 + "}", "--days", "1",
                 env={**TODAY, "TRAINJOBS_MAX_BODY_BYTES": "1024"})
    assert r.returncode == 2 and "larger than 1024 bytes (TRAINJOBS_MAX_BODY_BYTES" in r.stderr
