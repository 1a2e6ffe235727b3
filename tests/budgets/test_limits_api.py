"""Team limits through the API: each limit refuses with its problem, queue mode accepts,
a job that could never fit is refused either way, racing submits for the last slot."""
from __future__ import annotations

import threading

from tests.apikit import assert_problem
from tests.conftest import bearer

T4 = {"chief": {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}}


def _limits(client, **body):
    r = client.put("/v1/teams/alpha/limits", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _submit(client, **body):
    return client.post("/v1/jobs", json={"template": "mwms-demo", **body})


def test_set_and_read_limits(client, demo):
    assert client.get("/v1/teams/alpha/limits").json()["max_concurrent_jobs"] is None
    out = _limits(client, max_concurrent_jobs=3, max_accelerators={"NVIDIA_TESLA_T4": 4},
                  max_monthly_spend="12.5", on_exceed="queue")
    assert (out["max_concurrent_jobs"], out["max_accelerators"], out["max_monthly_spend"], out["on_exceed"],
            out["currency"]) == (3, {"NVIDIA_TESLA_T4": 4}, "12.500000", "queue", "USD")
    assert client.get("/v1/teams/alpha/limits").json() == out


def test_limits_are_for_admins_of_the_team(client, tokens, db_url):
    r = client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": 1}, headers=bearer(tokens["member"]))
    assert_problem(r, 403)
    assert_problem(client.put("/v1/teams/beta/limits", json={}), 404)
    assert_problem(client.get("/v1/teams/beta/usage"), 404)
    assert client.get("/v1/teams/alpha/usage", headers=bearer(tokens["viewer"])).status_code == 200


def test_bad_limits_are_422(client):
    assert_problem(client.put("/v1/teams/alpha/limits", json={"max_concurrent_jobs": -1}), 422, "max_concurrent_jobs")
    assert_problem(client.put("/v1/teams/alpha/limits", json={"on_exceed": "later"}), 422, "on_exceed")
    assert_problem(client.put("/v1/teams/alpha/limits", json={"max_gpus": 1}), 422, "max_gpus")
    assert_problem(client.put("/v1/teams/alpha/limits", json={"max_accelerators": {"t4": 1}}), 422)


def test_concurrent_jobs_limit_refuses_with_the_limit_and_use(client, demo):
    _limits(client, max_concurrent_jobs=1)
    assert _submit(client).status_code == 201
    body = assert_problem(_submit(client), 409, "limits.max_concurrent_jobs")
    assert body["type"].endswith("limit-exceeded") and body["limit"] == "max_concurrent_jobs"
    assert (body["use"], body["max"]) == ("1", "1")
    assert "PUT /v1/teams/alpha/limits" in body["errors"][0]["fix"]


def test_accelerator_limit_by_type(client, demo):
    _limits(client, max_accelerators={"NVIDIA_TESLA_T4": 1})
    assert _submit(client).status_code == 201            # no T4: not limited
    assert _submit(client, overrides=T4).status_code == 201
    body = assert_problem(_submit(client, overrides=T4), 409, "limits.max_accelerators.NVIDIA_TESLA_T4")
    assert (body["use"], body["max"], body["requested"]) == ("1", "1", "1")
    two = {"chief": {"accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2}}
    # More than the limit on its own: waiting would not help, in either mode.
    _limits(client, max_accelerators={"NVIDIA_TESLA_T4": 1}, on_exceed="queue")
    assert_problem(_submit(client, overrides=two), 422, "limits.max_accelerators.NVIDIA_TESLA_T4")


def test_monthly_spend_limit_counts_estimates_to_timeout(client, demo):
    # The demo's estimate to its 1 h timeout is 0.431233: one fits under 0.5, two do not.
    _limits(client, max_monthly_spend="0.5")
    assert _submit(client).status_code == 201
    body = assert_problem(_submit(client), 409, "limits.max_monthly_spend")
    assert (body["use"], body["max"], body["requested"]) == ("0.431233", "0.500000", "0.431233")
    usage = client.get("/v1/teams/alpha/usage").json()
    assert usage["spend"] == "0.431233" and usage["jobs"] == 1


def test_a_spend_limit_needs_complete_prices(client, demo):
    _limits(client, max_monthly_spend="100")
    r = _submit(client, overrides={"workers": {"machine_type": "n1-standard-8"}})
    body = assert_problem(r, 422, "cost")
    assert "no machine price for n1-standard-8" in body["errors"][0]["message"]


def test_queue_mode_accepts_the_job(client, demo):
    _limits(client, max_concurrent_jobs=1, on_exceed="queue")
    assert _submit(client).status_code == 201
    job = _submit(client)
    assert job.status_code == 201 and job.json()["state"] == "QUEUED"


def test_usage_and_metrics_show_use_and_limit(client, demo):
    _limits(client, max_concurrent_jobs=2, max_accelerators={"NVIDIA_TESLA_T4": 4})
    assert _submit(client, overrides=T4).status_code == 201
    usage = client.get("/v1/teams/alpha/usage").json()
    lines = {u["limit"]: (u["use"], u["max"]) for u in usage["limits"]}
    assert lines["max_concurrent_jobs"] == ("1", "2")
    assert lines["max_accelerators.NVIDIA_TESLA_T4"] == ("1", "4")
    assert lines["max_monthly_spend"][1] is None
    assert "estimate" in usage["note"].lower()
    public = client.get("/metrics", headers={"Authorization": ""}).text
    assert "trainjobs_team_limit_use{" not in public
    text = client.get("/metrics", headers=bearer("metrics-secret")).text
    assert 'trainjobs_team_limit_use{limit="max_concurrent_jobs",team="alpha"} 1.0' in text
    assert 'trainjobs_team_limit_max{limit="max_concurrent_jobs",team="alpha"} 2.0' in text
    assert 'trainjobs_team_limit_use{limit="max_accelerators.NVIDIA_TESLA_T4",team="alpha"} 1.0' in text
    assert 'trainjobs_team_limit_max{limit="max_accelerators.NVIDIA_TESLA_T4",team="alpha"} 4.0' in text


def test_racing_submits_for_the_last_slot_do_not_both_pass(api_client, settings, tokens, demo, client):
    """Two API processes' apps (own engines and pools) on one database, submits released at once."""
    apps = [api_client(settings, tokens["admin"]) for _ in range(2)]
    try:
        for limit in range(1, 6):
            _limits(client, max_concurrent_jobs=limit)
            barrier = threading.Barrier(2)
            codes: list[int] = []

            def go(c):
                barrier.wait()
                codes.append(_submit(c).status_code)
            threads = [threading.Thread(target=go, args=(a,)) for a in apps]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert sorted(codes) == [201, 409], (limit, codes)
            assert client.get("/v1/teams/alpha/usage").json()["jobs"] == limit
    finally:
        for a in apps:
            a.__exit__(None, None, None)
