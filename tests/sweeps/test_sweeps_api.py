"""Sweeps through the API, on SQLite and PostgreSQL. The local backend has room for no
running job here, so trials are created and stay QUEUED until a test cancels them: the
controller's passes (run_once) are the only thing that moves, and every pass is checked."""
from __future__ import annotations

import math
import uuid

import pytest
from sqlalchemy import update

from service.lifecycle.engine import Deposed
from service.persistence.models import SweepTrial
from service.sweeps.launcher import SweepLauncher
from tests.apikit import assert_problem
from tests.conftest import bearer
from tests.sweeps.helpers import create, get, template, unfinished


@pytest.fixture
def tmpl(client):
    r = client.post("/v1/templates", json=template(workers=["--exit", "0"]))
    assert r.status_code == 201, r.text


def trial_params(sweep: dict) -> list[dict]:
    return [t["parameters"] for t in sorted(sweep["trials"], key=lambda t: t["number"])]


def test_grid_is_every_combination_in_order(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2, 0.3]}, "opt": {}},
                   fixed_parameters={"epochs": 3}, labels={"study": "grid"})
    assert sweep["state"] == "RUNNING" and sweep["trial_count"] == 6 and sweep["algorithm"] == "grid"
    assert trial_params(sweep) == [{"epochs": 3, "acc": a, "opt": o}
                                   for a in (0.1, 0.2, 0.3) for o in ("adam", "sgd")]
    assert sweep["counts"] == {"WAITING": 6} and sweep["best"] is None
    assert sweep["search"]["labels"] == {"study": "grid"} and sweep["seed"] is None


def test_random_is_reproducible_from_its_seed_and_within_bounds(client, tmpl):
    space = {"lr": {"min": 0.0001, "max": 0.1, "scale": "log"}, "units": {}, "opt": {}, "shuffle": {},
             "acc": {"values": [0.25, 0.75]}}
    one = create(client, algorithm="random", parameters=space, trial_count=40, seed=7)
    again = create(client, algorithm="random", parameters=space, trial_count=40, seed=7)
    other = create(client, algorithm="random", parameters=space, trial_count=40, seed=8)
    assert one["seed"] == 7 and trial_params(one) == trial_params(again) != trial_params(other)
    trials = trial_params(one)
    assert all(0.0001 <= t["lr"] <= 0.1 for t in trials)
    assert all(isinstance(t["units"], int) and 1 <= t["units"] <= 512 for t in trials)  # the declared bounds
    assert {t["opt"] for t in trials} == {"adam", "sgd"} and {t["shuffle"] for t in trials} == {True, False}
    assert {t["acc"] for t in trials} == {0.25, 0.75}
    # Log-uniform: each decade holds about a third of the draws (uniform would put 90% in the top one).
    decades = [sum(1 for t in trials if lo <= t["lr"] < lo * 10) for lo in (0.0001, 0.001, 0.01)]
    assert all(n >= 5 for n in decades), decades
    # No seed given: one is chosen, shown, and draws the same trials again.
    unseeded = create(client, algorithm="random", parameters=space, trial_count=5)
    assert isinstance(unseeded["seed"], int)
    replay = create(client, algorithm="random", parameters=space, trial_count=5, seed=unseeded["seed"])
    assert trial_params(replay) == trial_params(unseeded)


@pytest.mark.parametrize("body, field, words", [
    ({"parameters": {"acc": {"values": [0.5, 1.5]}}}, "parameters.acc.values[1]", ["maximum 1", "0 to 1"]),
    ({"algorithm": "random", "trial_count": 3, "parameters": {"lr": {"min": 0.001, "max": 5}}},
     "parameters.lr.max", ["maximum 1", "1e-05 to 1"]),
    ({"algorithm": "random", "trial_count": 3, "parameters": {"acc": {"min": 0, "max": 1, "scale": "log"}}},
     "parameters.acc.min", ["positive"]),
    ({"parameters": {"units": {"values": [8, 16.5]}}}, "parameters.units.values[1]", ["expected int"]),
    ({"parameters": {"opt": {"values": ["adam", "rmsprop"]}}}, "parameters.opt.values[1]", ["not one of"]),
    ({"parameters": {"nope": {"values": [1]}}}, "parameters.nope", ["declares no such parameter"]),
    ({"parameters": {"acc": {"min": 0.1, "max": 0.2}}}, "parameters.acc", ["grid takes listed values"]),
    ({"parameters": {"lr": {}}}, "parameters.lr", ["no values listed"]),
    ({"algorithm": "random", "parameters": {"acc": {}}}, "trial_count", ["needs a number of trials"]),
    ({"algorithm": "random", "trial_count": 2, "parameters": {"opt": {"min": 1}}}, "parameters.opt",
     ["int or float"]),
    ({"fixed_parameters": {"acc": 0.3}}, "fixed_parameters.acc", ["also in the search space"]),
    ({"fixed_parameters": {"epochs": 99}}, "trials[1].parameters.epochs", ["above the maximum 10"]),
    ({"labels": {"trainjobs_trial": "x"}}, "labels.trainjobs_trial", ["reserved"]),
    ({"objective": {"metric": "val accuracy", "goal": "maximize"}}, "objective.metric", []),
    ({"objective": {"metric": "val_accuracy", "goal": "best"}}, "objective.goal", []),
    ({"parameters": {"acc": {"values": [0.1], "stride": 2}}}, "parameters.acc.stride", []),
    ({"max_parallel": 21}, "max_parallel", ["TRAINJOBS_SWEEP_MAX_PARALLEL"]),
])
def test_a_bad_space_is_refused_before_anything_starts(client, tmpl, body, field, words):
    from tests.sweeps.helpers import sweep_body
    r = client.post("/v1/sweeps", json=sweep_body(**body))
    problem = assert_problem(r, 422, field)
    text = " ".join(f"{e['message']} {e.get('fix', '')}" for e in problem["errors"])
    assert all(w in text for w in words), text
    assert client.get("/v1/sweeps").json()["items"] == []
    assert client.get("/v1/jobs").json()["items"] == []


def test_the_trial_limit_is_a_setting(api_client, settings, tokens, tmpl):
    with api_client(settings.model_copy(update={"sweep_max_trials": 4}), tokens["admin"]) as c:
        r = c.post("/v1/sweeps", json={**_grid(), "parameters": {"acc": {"values": [0.1, 0.2, 0.3]}, "opt": {}}})
        body = assert_problem(r, 422, "parameters")
        assert "6 combinations" in body["detail"] and "TRAINJOBS_SWEEP_MAX_TRIALS" in body["errors"][0]["fix"]
        assert_problem(c.post("/v1/sweeps", json={**_grid(), "algorithm": "random", "trial_count": 5,
                                                  "parameters": {"acc": {}}}), 422, "trial_count")
        assert create(c, parameters={"acc": {"values": [0.1, 0.2]}, "opt": {}})["trial_count"] == 4


def _grid() -> dict:
    from tests.sweeps.helpers import sweep_body
    return sweep_body()


def test_the_override_policy_applies_to_the_caller(client, tokens, tmpl):
    member = bearer(tokens["member"])
    patch = {"workers": {"replica_count": 3}}
    r = client.post("/v1/sweeps", json={**_grid(), "overrides": patch}, headers=member)
    assert_problem(r, 403)
    assert client.get("/v1/sweeps").json()["items"] == []
    # An admin may; the trials then carry it.
    sweep = create(client, overrides=patch)
    assert sweep["search"]["overrides"] == patch
    viewer = bearer(tokens["viewer"])
    assert_problem(client.post("/v1/sweeps", json=_grid(), headers=viewer), 403)


def _trial_jobs(client, sweep_id: str) -> list[dict]:
    jobs = []
    for t in get(client, sweep_id)["trials"]:
        if t["job_id"]:
            r = client.get(f"/v1/jobs/{t['job_id']}")
            assert r.status_code == 200
            jobs.append({**r.json(), "trial": t["number"]})
    return jobs


def test_trials_start_as_room_frees_never_above_max_parallel(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2, 0.3, 0.4, 0.5]}}, max_parallel=2)
    controller = client.app.state.controller
    passes, started = 0, []
    while get(client, sweep["id"])["state"] == "RUNNING":
        passes += 1
        assert passes < 20, "the sweep never ended"
        controller.run_once()
        now = get(client, sweep["id"])
        assert unfinished(now) <= 2, now["counts"]
        jobs = _trial_jobs(client, sweep["id"])
        started.append(len(jobs))
        # Room frees when a trial ends: cancel one unfinished trial per pass.
        waiting = [j for j in jobs if j["state"] == "QUEUED"]
        if waiting:
            assert client.post(f"/v1/jobs/{waiting[0]['id']}/cancel").status_code == 202
    assert started[0] == 2 and started[-1] == 5 and started == sorted(started)
    done = get(client, sweep["id"])
    # No trial succeeded: the sweep failed (a cancel of the sweep itself would say CANCELLED).
    assert done["state"] == "FAILED" and done["ended_at"] and done["counts"] == {"CANCELLED": 5}


def test_each_trial_is_a_job_that_knows_its_trial(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2]}}, max_parallel=2, labels={"study": "s1"},
                   display_name="lr-study")
    client.app.state.controller.run_once()
    jobs = sorted(_trial_jobs(client, sweep["id"]), key=lambda j: j["trial"])
    assert [j["parameters"] for j in jobs] == [{"acc": 0.1}, {"acc": 0.2}]
    for n, job in enumerate(jobs, 1):
        assert job["display_name"] == f"lr-study-{n}" and job["labels"] == {"study": "s1"}
        labels = job["custom_job"]["labels"]
        assert labels["trainjobs_sweep_id"] == sweep["id"] and labels["trainjobs_trial"] == str(n)
        for pool in job["custom_job"]["jobSpec"]["workerPoolSpecs"]:
            assert {"name": "CLOUD_ML_TRIAL_ID", "value": str(n)} in pool["containerSpec"]["env"]
        for replica in job["cluster"]:
            assert replica["env"]["CLOUD_ML_TRIAL_ID"] == str(n)
    # Filtering jobs by the sweep's own labels works like any label filter.
    assert {j["id"] for j in client.get("/v1/jobs", params={"label": "study=s1"}).json()["items"]} == {
        j["id"] for j in jobs}


def test_cancel_stops_unfinished_trials_and_starts_no_more(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2, 0.3, 0.4]}}, max_parallel=2)
    controller = client.app.state.controller
    controller.run_once()
    assert len(_trial_jobs(client, sweep["id"])) == 2
    r = client.post(f"/v1/sweeps/{sweep['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING", r.text
    assert {j["state"] for j in _trial_jobs(client, sweep["id"])} == {"CANCELLING"}
    assert client.post(f"/v1/sweeps/{sweep['id']}/cancel").status_code == 202   # asking again is fine
    controller.run_once()
    done = get(client, sweep["id"])
    assert done["state"] == "CANCELLED" and done["counts"] == {"CANCELLED": 2, "WAITING": 2}
    controller.run_once()
    assert len(_trial_jobs(client, sweep["id"])) == 2
    assert_problem(client.post(f"/v1/sweeps/{sweep['id']}/cancel"), 409)
    assert_problem(client.post(f"/v1/sweeps/{uuid.uuid4()}/cancel"), 404)


def test_a_trial_is_never_started_twice(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2, 0.3]}}, max_parallel=3)
    state = client.app.state
    controller = state.controller
    controller.run_once()
    assert len(_trial_jobs(client, sweep["id"])) == 3
    # A second launcher (as in another process) that believes trial 1 is still to start.
    other = SweepLauncher(state.session_factory, state.lifecycle, state.submitter,
                          interval=1, batch_size=10, fence=None)
    from service.persistence.models import Sweep
    with state.session_factory() as session:
        other._start(session, session.get(Sweep, uuid.UUID(sweep["id"])), 1)
    assert len(client.get("/v1/jobs").json()["items"]) == 3
    # A deposed controller (an older epoch) starts nothing at all.
    stale = SweepLauncher(state.session_factory, state.lifecycle, state.submitter,
                          interval=1, batch_size=10, fence=controller.epoch - 1)
    with pytest.raises(Deposed):
        stale.run_once()


def test_a_job_whose_link_was_lost_is_found_again(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2]}}, max_parallel=1)
    controller = client.app.state.controller
    controller.run_once()
    [job] = _trial_jobs(client, sweep["id"])
    # As if the controller died between the job's commit and the link's.
    with client.app.state.session_factory() as session:
        session.execute(update(SweepTrial).values(job_id=None))
        session.commit()
    controller.run_once()
    now = get(client, sweep["id"])
    assert [(t["number"], t["job_id"]) for t in now["trials"] if t["state"] != "WAITING"] == [(1, job["id"])]
    assert now["counts"] == {"QUEUED": 1, "WAITING": 1}   # still max_parallel 1: trial 2 waits


def test_list_is_paged_newest_first(client, tmpl):
    ids = [create(client)["id"] for _ in range(3)]
    page = client.get("/v1/sweeps", params={"limit": 2}).json()
    assert [s["id"] for s in page["items"]] == ids[::-1][:2] and page["next_cursor"]
    rest = client.get("/v1/sweeps", params={"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [s["id"] for s in rest["items"]] == ids[:1] and rest["next_cursor"] is None
    assert rest["items"][0]["counts"] == {"WAITING": 2}
    client.post(f"/v1/sweeps/{ids[0]}/cancel")
    cancelling = client.get("/v1/sweeps", params={"state": "CANCELLING"}).json()["items"]
    assert [s["id"] for s in cancelling] == [ids[0]]
    assert_problem(client.get("/v1/sweeps", params={"cursor": "nonsense"}), 422, "cursor")
    assert_problem(client.get(f"/v1/sweeps/{uuid.uuid4()}"), 404)


def test_another_team_sees_nothing(client, db_url, tmpl):
    from tests.conftest import make_token
    sweep = create(client)
    other = bearer(make_token(db_url, "beta", "admin"))
    assert_problem(client.get(f"/v1/sweeps/{sweep['id']}", headers=other), 404)
    assert client.get("/v1/sweeps", headers=other).json()["items"] == []


def test_unfinished_sweeps_per_team_are_limited(api_client, settings, tokens, tmpl):
    with api_client(settings.model_copy(update={"sweep_max_active_per_team": 1}), tokens["admin"]) as c:
        first = create(c)
        body = assert_problem(c.post("/v1/sweeps", json=_grid()), 409)
        assert "TRAINJOBS_SWEEP_MAX_ACTIVE_PER_TEAM" in body["detail"]
        c.post(f"/v1/sweeps/{first['id']}/cancel")
        c.app.state.controller.run_once()
        assert get(c, first["id"])["state"] == "CANCELLED"
        create(c)


def test_ranking_puts_the_best_first_for_either_goal():
    from service.sweeps.schemas import TrialOut
    from service.sweeps.service import rank
    trials = [TrialOut(number=n, parameters={}, state="SUCCEEDED", objective_value=v)
              for n, v in ((1, 0.5), (2, None), (3, 0.9), (4, 0.1), (5, 0.9))]
    assert [t.number for t in rank(trials, "maximize")] == [3, 5, 1, 4, 2]
    assert [t.number for t in rank(trials, "minimize")] == [4, 1, 3, 5, 2]
    assert not math.isnan(rank(trials, "minimize")[0].objective_value)


def test_a_trial_that_can_no_longer_be_created_fails_and_the_sweep_goes_on(client, tmpl):
    sweep = create(client, parameters={"acc": {"values": [0.1, 0.2]}}, max_parallel=2)
    assert client.post("/v1/templates/sweepable/archive").status_code == 200
    controller = client.app.state.controller
    controller.run_once()
    done = get(client, sweep["id"])
    assert [(t["state"], t["job_id"]) for t in done["trials"]] == [("FAILED", None), ("FAILED", None)]
    assert all("archived" in t["error"] for t in done["trials"])
    assert done["state"] == "FAILED" and done["counts"] == {"FAILED": 2}
    assert client.get("/v1/jobs").json()["items"] == []


def test_one_broken_sweep_does_not_hold_up_the_others(client, tmpl):
    from service.persistence.models import Sweep
    broken = create(client, max_parallel=1)
    # A plan shorter than its trial count (as no request can make): starting trial 3 fails.
    with client.app.state.session_factory() as session:
        session.execute(update(Sweep).where(Sweep.id == uuid.UUID(broken["id"])).values(trial_count=3))
        session.commit()
    fine = create(client, max_parallel=1)
    controller = client.app.state.controller
    for _ in range(3):
        controller.run_once()
        for sweep in (broken, fine):
            for t in get(client, sweep["id"])["trials"]:
                if t["state"] == "QUEUED":
                    assert client.post(f"/v1/jobs/{t['job_id']}/cancel").status_code == 202
    controller.run_once()
    assert get(client, fine["id"])["state"] == "FAILED"          # all its trials ran (and were cancelled)
    assert get(client, broken["id"])["state"] == "RUNNING"
    assert controller.services["sweeps"].errors >= 1
