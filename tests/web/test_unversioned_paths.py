"""`POST /jobs` and the other unversioned paths a user would try answer a 404 problem that
names the versioned path (service/web/versioned_paths.py); they run nothing."""
from sqlalchemy import create_engine, func, select

from service.persistence.models import Job
from tests.apikit import assert_problem
from tests.conftest import ONE_DATABASE, bearer

pytestmark = ONE_DATABASE


def jobs_in(db_url: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(Job)).scalar_one()
    finally:
        engine.dispose()


def test_post_jobs_names_the_versioned_path_and_launches_nothing(client, demo, db_url):
    body = {"template": "mwms-demo", "parameters": {"epochs": 1}}
    r = client.post("/jobs?dry_run=false", json=body)
    problem = assert_problem(r, 404)
    assert problem["type"] == "/problems/unversioned-path"
    assert problem["use"] == "/v1/jobs?dry_run=false"
    assert "POST /v1/jobs?dry_run=false" in problem["detail"]
    assert jobs_in(db_url) == 0
    # The path it names is the one that works, with the same request.
    assert client.post(problem["use"], json=body).status_code == 201
    assert jobs_in(db_url) == 1


def test_get_of_a_job_template_and_sweeps_name_their_versioned_paths(client, demo, tokens):
    job = client.post("/v1/jobs", json={"template": "mwms-demo"}).json()
    for path in (f"/jobs/{job['id']}", "/jobs", "/templates", "/templates/mwms-demo", "/sweeps",
                 f"/jobs/{job['id']}/events", "/templates:import"):
        problem = assert_problem(client.get(path), 404)
        assert problem["use"] == "/v1" + path, path
        assert client.get(problem["use"]).status_code in (200, 405), path  # a GET-less route says 405


def test_the_hint_needs_no_token_but_the_named_path_still_does(client):
    anonymous = {"Authorization": ""}
    problem = assert_problem(client.get("/jobs", headers=anonymous), 404)
    assert problem["use"] == "/v1/jobs"
    assert_problem(client.get(problem["use"], headers=anonymous), 401)
    assert_problem(client.get(problem["use"], headers=bearer("tj_not-a-token")), 401)


def test_paths_no_version_serves_stay_a_plain_404(client):
    for path in ("/nowhere", "/jobsx", "/v1/nowhere", "/v1/v1/jobs"):
        problem = assert_problem(client.get(path), 404)
        assert problem["type"] == "/problems/not-found" and "use" not in problem, path


def test_the_openapi_document_has_versioned_paths_only(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert "/v1/jobs" in paths
    assert [p for p in paths if not p.startswith("/v1/") and p not in ("/healthz", "/readyz", "/metrics")] == []
