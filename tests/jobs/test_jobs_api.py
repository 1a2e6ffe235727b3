import copy
import json
import uuid
from datetime import UTC, datetime, timedelta

from service.core.pagination import encode_cursor
from tests.apikit import DEMO, assert_problem


def submit(client, **body):
    r = client.post("/v1/jobs", json={"template": "mwms-demo", **body})
    assert r.status_code == 201, r.text
    return r.json()


def test_dry_run_shows_the_custom_job_and_cluster_and_stores_nothing(client, demo):
    r = client.post("/v1/jobs", params={"dry_run": True},
                    json={"template": "mwms-demo", "parameters": {"epochs": 5},
                          "overrides": {"workers": {"replica_count": 2}}, "labels": {"team": "vision"}})
    assert r.status_code == 200, r.text
    preview = r.json()
    pools = preview["custom_job"]["jobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == ["1", "2"]
    assert "--epochs=5" in pools[0]["containerSpec"]["args"]
    assert preview["labels"]["team"] == "vision" and "trainjobs_job_id" in preview["labels"]
    tasks = [r["task_name"] for r in preview["cluster"]]
    assert tasks == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    tf = json.loads(preview["cluster"][2]["env"]["TF_CONFIG"])
    assert tf["task"] == {"type": "worker", "index": 1} and len(tf["cluster"]["worker"]) == 2
    assert client.get("/v1/jobs").json()["items"] == []


def test_create_stores_the_job_queued_with_its_template_version(client, demo):
    job = submit(client, parameters={"epochs": 3}, display_name="first run", labels={"team": "vision"})
    assert job["state"] == "QUEUED"
    assert job["template"] == {"name": "mwms-demo", "version": 1}
    assert job["display_name"] == "first run"
    assert job["custom_job"]["labels"]["trainjobs_job_id"] == job["id"]
    assert [r["tf_role"] for r in job["cluster"]] == ["chief", "worker"]
    got = client.get(f"/v1/jobs/{job['id']}").json()
    assert got["parameters"] == {"epochs": 3} and got["custom_job"] == job["custom_job"]
    events = client.get(f"/v1/jobs/{job['id']}/events").json()
    assert [(e["from_state"], e["to_state"]) for e in events] == [(None, "QUEUED")]

    # A later template version does not change what the job recorded.
    new = copy.deepcopy(DEMO)
    del new["name"]
    new["spec"]["workers"]["replica_count"] = 4
    client.put("/v1/templates/mwms-demo", json=new)
    assert client.get(f"/v1/jobs/{job['id']}").json()["template"]["version"] == 1
    assert submit(client)["template"]["version"] == 2
    assert submit(client, template_version=1)["template"]["version"] == 1


def test_a_local_job_shows_what_its_replicas_get_here_not_vertex_addresses(client, demo, settings):
    """Before launch the 127.0.0.1 ports are not chosen: said so, never a Vertex host:port. The
    output directories are the run folder's, as the local backend gives them."""
    job = submit(client, overrides={"base_output_directory": "gs://bucket/exp"})
    assert job["waiting_reason"] is None
    run = settings.resolved_local_work_dir().resolve() / job["id"]
    for view in (job, client.get(f"/v1/jobs/{job['id']}").json()):
        for replica in view["cluster"]:
            env = replica["env"]
            cluster = json.loads(env["TF_CONFIG"])["cluster"]
            assert cluster == {"chief": ["127.0.0.1:<port chosen at launch>"],
                               "worker": ["127.0.0.1:<port chosen at launch>"]}
            assert env["AIP_MODEL_DIR"] == f"{run}/output/model/"
            assert env["HOME"] == f"{run}/work/home"
            assert env["TRAINJOBS_LOCAL_REPLICA"] == f"{job['id']}/{replica['task_name']}"
            assert "2222" not in json.dumps(env) and "gs://bucket/exp/model" not in json.dumps(env)
    # The demo sets no output directory: the run's own folder, as Vertex uses the service's default.
    preview = client.post("/v1/jobs", params={"dry_run": True}, json={"template": "mwms-demo"}).json()
    pid = preview["labels"]["trainjobs_job_id"]
    runs = settings.resolved_local_work_dir().resolve()
    assert preview["cluster"][0]["env"]["AIP_MODEL_DIR"] == f"{runs}/{pid}/output/model/"


def test_labels_as_google_documents_them(client, demo):
    ok = {"équipe": "données", "日本": "値", "k" * 64: "v" * 64, "a-b_c": ""}
    job = submit(client, labels=ok)
    assert {k: job["labels"][k] for k in ok} == ok and job["custom_job"]["labels"]["équipe"] == "données"
    found = client.get("/v1/jobs", params={"label": "équipe=données"}).json()["items"]
    assert [j["id"] for j in found] == [job["id"]]
    for bad in ({"Team": "x"}, {"1team": "x"}, {"team": "Vision"}, {"k" * 65: "x"}, {"team": "v" * 65},
                {"team": "a b"}, {"trainjobs_job_id": "x"}, {"trainjobs-job-id": "x"}):
        r = client.post("/v1/jobs", json={"template": "mwms-demo", "labels": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["errors"][0]["field"].startswith("labels")
    assert_problem(client.get("/v1/jobs", params={"label": "Team=x"}), 422, "label")


def test_default_display_name_names_the_template(client, demo):
    job = submit(client)
    assert job["display_name"] == f"mwms-demo-{uuid.UUID(job['id']).hex[:8]}"


def test_cancel_a_queued_job(client, demo):
    job = submit(client)
    r = client.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCELLING"
    again = client.post(f"/v1/jobs/{job['id']}/cancel")  # asking twice is no error
    assert again.status_code == 202 and again.json()["state"] == "CANCELLING"
    client.app.state.controller.run_once()
    assert client.get(f"/v1/jobs/{job['id']}").json()["state"] == "CANCELLED"
    events = client.get(f"/v1/jobs/{job['id']}/events").json()
    assert [e["to_state"] for e in events] == ["QUEUED", "CANCELLING", "CANCELLED"]
    assert events[1]["actor"] == "admin-user@alpha"
    body = assert_problem(client.post(f"/v1/jobs/{job['id']}/cancel"), 409)
    assert "already ended (CANCELLED)" in body["detail"]


def test_bad_submissions_say_what_and_how(client, demo):
    assert_problem(client.post("/v1/jobs", json={"template": "nope"}), 404)
    body = assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "backend": "vertex"}),
                          422, "backend")
    assert "TRAINJOBS_BACKENDS" in body["errors"][0]["fix"]
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": 0}}),
                   422, "parameters.epochs")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"nope": 1}}),
                   422, "parameters.nope")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": [1]}), 422, "overrides")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo",
                                                 "overrides": {"chief": {"replica_count": 2}}}),
                   422, "spec.chief.replica_count")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "labels": {"Bad": "x"}}),
                   422, "labels.Bad")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "display_name": "x" * 129}),
                   422, "display_name")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "colour": "red"}), 422, "colour")
    r = client.post("/v1/jobs", content=b'{"template": ', headers={"content-type": "application/json"})
    assert_problem(r, 422)
    assert_problem(client.get(f"/v1/jobs/{uuid.uuid4()}"), 404)
    assert_problem(client.get("/v1/jobs/not-a-uuid"), 422)
    assert client.get("/v1/jobs").json()["items"] == []  # nothing half-made was stored


def test_list_filters(client, demo):
    a = submit(client, labels={"team": "vision", "size": "s"})
    b = submit(client, labels={"team": "nlp"})
    c = submit(client, labels={"team": "vision"})
    client.post(f"/v1/jobs/{c['id']}/cancel")
    client.app.state.controller.run_once()

    def ids(**params):
        return [j["id"] for j in client.get("/v1/jobs", params=params).json()["items"]]

    assert ids() == [c["id"], b["id"], a["id"]]  # newest first
    assert ids(state="CANCELLED") == [c["id"]]
    assert ids(state=["QUEUED", "CANCELLED"]) == [c["id"], b["id"], a["id"]]
    assert ids(label="team=vision") == [c["id"], a["id"]]
    assert ids(label=["team=vision", "size=s"]) == [a["id"]]
    assert ids(label="size") == [a["id"]]
    assert ids(template="mwms-demo") == [c["id"], b["id"], a["id"]]
    assert ids(template="other") == []
    b_at = datetime.fromisoformat(client.get(f"/v1/jobs/{b['id']}").json()["created_at"])
    assert ids(created_after=b_at.isoformat()) == [c["id"], b["id"]]
    assert ids(created_before=b_at.isoformat()) == [a["id"]]
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert ids(created_after=future) == []
    assert_problem(client.get("/v1/jobs", params={"created_after": "2026-01-01T00:00:00"}), 422, "created_after")
    assert_problem(client.get("/v1/jobs", params={"state": "DONE"}), 422)


def test_cursor_pagination_visits_every_job_once(client, demo):
    made = [submit(client)["id"] for _ in range(7)]
    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/jobs", params=params).json()
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(made))
    assert_problem(client.get("/v1/jobs", params={"cursor": "garbage!"}), 422, "cursor")
    naive = encode_cursor("2026-01-01T00:00:00", uuid.uuid4())  # well-formed, but no time zone
    assert_problem(client.get("/v1/jobs", params={"cursor": naive}), 422, "cursor")
    assert_problem(client.get("/v1/jobs", params={"limit": 0}), 422)


def test_unknown_routes_and_methods_are_problems(client):
    assert_problem(client.get("/v1/nothing"), 404)
    assert_problem(client.delete("/v1/jobs"), 405)


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json()["database"] == "ok"


def test_hostile_bodies_get_4xx(client, demo):
    deep = b'{"template":"mwms-demo","overrides":' + b"[" * 100000 + b"]" * 100000 + b"}"
    r = client.post("/v1/jobs", content=deep, headers={"content-type": "application/json"})
    assert_problem(r, 400)
    nested = {"a": 1}
    for _ in range(200):
        nested = {"a": nested}
    body = assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": nested}),
                          422, "overrides")
    assert "deeper than 16" in body["errors"][0]["message"]
    many = {f"k{i}": "v" for i in range(65)}
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "labels": many}), 422, "labels")
    long_arg = {"container": {"args": ["x" * 5000]}}
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "overrides": long_arg}),
                   422, "spec.container.args.0")
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "parameters": {"epochs": "x" * 5000}}),
                   422, "parameters.epochs")


def test_text_the_database_cannot_store_is_refused(client, demo):
    body = assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo", "display_name": "a\x00b"}), 422)
    assert "display_name" in body["detail"] and "NUL" in body["detail"]
    raw = b'{"template": "mwms-demo", "labels": {"team": "\\udb47"}}'
    assert_problem(client.post("/v1/jobs", content=raw, headers={"content-type": "application/json"}), 422)
    assert_problem(client.get("/v1/templates/a%00b"), 422)
    assert_problem(client.get("/v1/jobs", params={"label": "team=a\x00"}), 422)
    assert client.get("/v1/jobs").json()["items"] == []
