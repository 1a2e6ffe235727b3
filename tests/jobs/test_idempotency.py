"""Idempotency-Key: a retried submit never makes a second job."""
from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy import func, select

from service.persistence.models import Job
from service.persistence.session import make_engine, make_session_factory
from tests.apikit import DEMO, assert_problem
from tests.conftest import bearer, make_token


def test_same_key_same_body_is_the_same_job(client, demo):
    body = {"template": "mwms-demo", "parameters": {"epochs": 3}}
    first = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
    again = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert len(client.get("/v1/jobs").json()["items"]) == 1


def test_same_key_other_body_is_a_conflict(client, demo):
    client.post("/v1/jobs", json={"template": "mwms-demo"}, headers={"Idempotency-Key": "k-2"})
    body = assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 9}},
                                      headers={"Idempotency-Key": "k-2"}), 409)
    assert "different request" in body["detail"]


def test_keys_belong_to_a_team(client, demo, db_url):
    beta = bearer(make_token(db_url, "beta", "admin"))
    client.post("/v1/templates", json=DEMO, headers=beta)
    a = client.post("/v1/jobs", json={"template": "mwms-demo"}, headers={"Idempotency-Key": "shared"}).json()
    b = client.post("/v1/jobs", json={"template": "mwms-demo"}, headers={**beta, "Idempotency-Key": "shared"}).json()
    assert a["id"] != b["id"]


def test_bad_keys_are_refused(client, demo):
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo"}, headers={"Idempotency-Key": "x" * 256}),
                   422)


def test_fifty_concurrent_requests_with_one_key_make_one_job(live_server, demo_live, tokens, db_url):
    body = {"template": "mwms-demo", "parameters": {"epochs": 4}}
    headers = {**bearer(tokens["member"]), "Idempotency-Key": "race-1"}

    def post(_):
        with httpx.Client(base_url=live_server, timeout=60) as c:
            return c.post("/v1/jobs", json=body, headers=headers)

    with ThreadPoolExecutor(50) as pool:
        responses = list(pool.map(post, range(50)))
    assert [r.status_code for r in responses] == [201] * 50, {r.status_code: r.text for r in responses}
    assert len({r.json()["id"] for r in responses}) == 1
    assert sum(1 for r in responses if "idempotent-replayed" not in r.headers) == 1
    engine = make_engine(db_url)
    with make_session_factory(engine)() as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 1
    engine.dispose()
