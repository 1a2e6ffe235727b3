import copy

from tests.apikit import DEMO, assert_problem


def test_create_and_get(client, demo):
    assert demo["name"] == "mwms-demo" and demo["version"] == 1 and demo["latest_version"] == 1
    r = client.get("/v1/templates/mwms-demo")
    assert r.status_code == 200
    assert r.json()["spec"]["workers"]["replica_count"] == 1
    assert [p["name"] for p in r.json()["parameters"]] == ["epochs", "steps_per_epoch", "batch_size", "learning_rate"]


def test_duplicate_name_is_a_conflict(client, demo):
    body = assert_problem(client.post("/v1/templates", json=DEMO), 409)
    assert "PUT /v1/templates/mwms-demo" in body["detail"]


def test_update_writes_a_new_immutable_version(client, demo):
    new = copy.deepcopy(DEMO)
    del new["name"]
    new["spec"]["workers"]["replica_count"] = 3
    r = client.put("/v1/templates/mwms-demo", json=new)
    assert r.status_code == 200 and r.json()["version"] == 2
    assert client.get("/v1/templates/mwms-demo").json()["spec"]["workers"]["replica_count"] == 3
    v1 = client.get("/v1/templates/mwms-demo", params={"version": 1}).json()
    assert v1["spec"]["workers"]["replica_count"] == 1 and v1["latest_version"] == 2
    assert [v["version"] for v in client.get("/v1/templates/mwms-demo/versions").json()] == [1, 2]
    assert_problem(client.get("/v1/templates/mwms-demo", params={"version": 9}), 404)


def test_archive_hides_it_and_blocks_new_jobs(client, demo):
    assert client.post("/v1/templates/mwms-demo/archive").json()["archived"] is True
    assert client.get("/v1/templates").json()["items"] == []
    listed = client.get("/v1/templates", params={"include_archived": True}).json()["items"]
    assert [t["name"] for t in listed] == ["mwms-demo"]
    assert_problem(client.post("/v1/jobs", json={"template": "mwms-demo"}), 409)
    client.post("/v1/templates/mwms-demo/unarchive")
    assert client.post("/v1/jobs", json={"template": "mwms-demo"}).status_code == 201


def test_unknown_template_is_404(client):
    assert_problem(client.get("/v1/templates/nope"), 404)
    assert_problem(client.put("/v1/templates/nope", json={k: v for k, v in DEMO.items() if k != "name"}), 404)


def test_invalid_templates_name_the_field(client):
    bad = copy.deepcopy(DEMO)
    bad["spec"]["chief"]["replica_count"] = 2
    assert_problem(client.post("/v1/templates", json=bad), 422, "spec.chief.replica_count")
    bad = copy.deepcopy(DEMO)
    bad["spec"]["wokers"] = {}
    body = assert_problem(client.post("/v1/templates", json=bad), 422, "spec.wokers")
    assert body["errors"][0]["message"] == "unknown field"
    bad = copy.deepcopy(DEMO)
    bad["name"] = "Bad Name"
    assert_problem(client.post("/v1/templates", json=bad), 422, "name")
    bad = copy.deepcopy(DEMO)
    bad["spec"]["container"]["args"].append("--x=${undeclared}")
    assert_problem(client.post("/v1/templates", json=bad), 422, "spec.container.args[7]")


def test_list_pages_through_templates(client):
    for i in range(5):
        body = copy.deepcopy(DEMO)
        body["name"] = f"t{i}"
        assert client.post("/v1/templates", json=body).status_code == 201
    seen, cursor = [], None
    while True:
        page = client.get("/v1/templates", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [t["name"] for t in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == ["t0", "t1", "t2", "t3", "t4"]


def test_a_2xx_means_it_is_stored(live_server, tokens):
    """The unit of work commits before the response is sent: a client that got 201
    can read what it made at once, over a real server."""
    import httpx

    from tests.conftest import bearer
    with httpx.Client(base_url=live_server, headers=bearer(tokens["admin"])) as c:
        for i in range(15):
            body = {**DEMO, "name": f"quick-{i}"}
            assert c.post("/v1/templates", json=body).status_code == 201
            assert c.get(f"/v1/templates/quick-{i}").status_code == 200
            assert c.post(f"/v1/templates/quick-{i}/archive").json()["archived"] is True
            assert c.get("/v1/templates", params={"include_archived": False}).json()["items"] == []


def test_a_dry_run_create_shows_the_stored_form_and_stores_nothing(client):
    """What `trainjobs templates apply` compares a file with: defaults filled in, nothing stored."""
    body = {"name": "preview-me", "spec": {"container": {"image_uri": "img:1"}, "chief": {"machine_type": "n1-standard-4"}}}
    r = client.post("/v1/templates?dry_run=true", json=body)
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["name"] == "preview-me" and shown["parameters"] == []
    assert shown["spec"]["chief"]["replica_count"] == 1          # a default the file left out
    assert client.get("/v1/templates/preview-me").status_code == 404
    bad = client.post("/v1/templates?dry_run=true", json={**body, "spec": {**body["spec"], "chief": {"replica_count": 2}}})
    assert bad.status_code == 422
