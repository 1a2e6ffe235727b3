"""Environment variables members may set are an allow-list per template: a template that
opens its container (or its env map) lets members change the values of the names it sets
there, and add only the names its `overridable` lists one by one. Startup names stay
refused to members even when listed; a template cannot list them. SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from tests.apikit import assert_problem
from tests.conftest import bearer
from tests.templates.test_override_policy import launch, template


@pytest.fixture
def member(tokens):
    return bearer(tokens["member"])


@pytest.fixture
def env_open(client):
    body = template("envmap", overridable=["container.env", "container.env.BATCH_SIZE", "workers"],
                    env={"NCCL_DEBUG": "WARN", "EPOCHS": "3"})
    r = client.post("/v1/templates", json=body)
    assert r.status_code == 201, r.text


def test_members_change_the_templates_own_names_and_the_listed_ones(client, member, env_open):
    r = launch(client, member, {"container": {"env": {"NCCL_DEBUG": "INFO", "EPOCHS": None, "BATCH_SIZE": "64"}}},
               name="envmap")
    assert r.status_code == 201, r.text
    env = r.json()["cluster"][0]["env"]
    assert env["NCCL_DEBUG"] == "INFO" and env["BATCH_SIZE"] == "64" and "EPOCHS" not in env


@pytest.mark.parametrize("name", ["MY_SETTING", "TF_FORCE_GPU_ALLOW_GROWTH", "SOME_FUTURE_LOADER_HOOK"])
def test_a_name_the_template_neither_sets_nor_lists_is_refused(client, member, env_open, name):
    body = assert_problem(launch(client, member, {"container": {"env": {name: "1"}}}, name="envmap"), 403,
                          f"overrides.container.env.{name}")
    assert "container.env." + name in body["errors"][0]["fix"] and "overridable" in body["errors"][0]["fix"]
    # Nor in a role's container that a grant of the role covers (workers is not sensitive; its container is).
    assert_problem(launch(client, member, {"workers": {"container": {"env": {name: "1"}}}}, name="envmap"), 403,
                   f"overrides.workers.container.env.{name}")
    assert client.get("/v1/jobs").json()["items"] == []


def test_an_admin_may_still_set_any_name_but_reserved_ones(client, env_open):
    r = launch(client, None, {"container": {"env": {"MY_SETTING": "1", "GRPC_PROXY": "http://10.0.0.1:3128"}}},
               name="envmap")
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("name", ["GRPC_PROXY", "grpc_proxy", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH",
                                  "OMP_TOOL_LIBRARIES", "PIP_INDEX_URL", "KRB5_CONFIG", "STORAGE_EMULATOR_HOST",
                                  "LD_PRELOAD", "AIP_MODEL_DIR"])
def test_a_template_cannot_open_a_startup_or_reserved_name_to_members(client, name):
    r = client.post("/v1/templates", json=template("listsbad", overridable=[f"container.env.{name}"]))
    body = assert_problem(r, 422, "spec.overridable[0]")
    assert "members may never set it" in str(body)
