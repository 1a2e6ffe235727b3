"""The fakes themselves: strict where Google is, driven through the real client
libraries in REST mode (and raw HTTP where a client could never send the mistake)."""
from __future__ import annotations

import time

import pytest
import requests
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1 as v1
from google.protobuf import field_mask_pb2

from tests.fakes import filters
from tests.fakes.harness import LOCATION, PROJECT, fake_vertex  # noqa: F401 - fixture

PARENT = f"projects/{PROJECT}/locations/{LOCATION}"


@pytest.fixture
def client(fake_vertex):
    c = v1.JobServiceClient(transport="rest", credentials=AnonymousCredentials(),
                            client_options=ClientOptions(api_endpoint=fake_vertex.url))
    yield c
    c.transport.close()


def custom_job(name="job", labels=None, accelerator=True) -> v1.CustomJob:
    machine = v1.MachineSpec(machine_type="n1-standard-8")
    if accelerator:
        machine.accelerator_type = v1.AcceleratorType.NVIDIA_TESLA_T4
        machine.accelerator_count = 2
    pool = v1.WorkerPoolSpec(machine_spec=machine, replica_count=1,
                             container_spec=v1.ContainerSpec(image_uri="us-docker.pkg.dev/p/r/trainer:1"))
    return v1.CustomJob(display_name=name, labels=labels or {},
                        job_spec=v1.CustomJobSpec(worker_pool_specs=[pool]))


def post_raw(fake, body: dict, alt: bool = True):
    url = f"{fake.url}/v1/{PARENT}/customJobs" + ("?$alt=json;enum-encoding=int" if alt else "")
    return requests.post(url, json=body, timeout=10)


def test_create_refuses_unknown_fields_in_googles_error_shape(fake_vertex):
    r = post_raw(fake_vertex, {"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
         "containerSpec": {"imageUri": "i", "entrypoint": ["python"]}}]}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT"
    assert "entrypoint" in err["message"]
    assert fake_vertex.jobs == {}


@pytest.mark.parametrize("body, needle", [
    ({"jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                       "replicaCount": "1", "containerSpec": {"imageUri": "i"}}]}},
     "display_name is required"),
    ({"displayName": "x", "jobSpec": {}}, "worker_pool_specs is required"),
    ({"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2", "containerSpec": {"imageUri": "i"}}]}},
     "must be 1"),
    ({"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "one"}]}}, "replicaCount"),
    ({"displayName": "x", "state": "JOB_STATE_RUNNING", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": {"imageUri": "i"}}]}},
     "output only"),
    ({"displayName": "x", "labels": {"Bad Key": "v"}, "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": {"imageUri": "i"}}]}},
     "invalid label"),
])
def test_create_refuses_malformed_custom_jobs(fake_vertex, body, needle):
    r = post_raw(fake_vertex, body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_the_client_sends_enums_as_ints_and_gets_them_back_as_ints(fake_vertex, client):
    created = client.create_custom_job(parent=PARENT, custom_job=custom_job())
    assert fake_vertex.alt_params == {"json;enum-encoding=int"}
    assert created.job_spec.worker_pool_specs[0].machine_spec.accelerator_type == v1.AcceleratorType.NVIDIA_TESLA_T4
    assert created.state == v1.JobState.JOB_STATE_PENDING
    raw_int = requests.get(f"{fake_vertex.url}/v1/{created.name}?$alt=json;enum-encoding=int", timeout=10).json()
    raw_names = requests.get(f"{fake_vertex.url}/v1/{created.name}", timeout=10).json()
    assert raw_int["state"] == 2 and raw_names["state"] == "JOB_STATE_PENDING"
    assert raw_int["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == 5
    assert raw_int["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"  # int64: a JSON string


def test_list_filters_by_label_state_name_and_create_time(fake_vertex, client):
    a = client.create_custom_job(parent=PARENT, custom_job=custom_job("alpha-1", {"team": "a", "k": "1"}))
    time.sleep(0.002)
    b = client.create_custom_job(parent=PARENT, custom_job=custom_job("alpha-2", {"team": "a"}))
    c = client.create_custom_job(parent=PARENT, custom_job=custom_job("beta", {"team": "b"}))
    fake_vertex.set_state(b.name, "JOB_STATE_SUCCEEDED")

    def names(flt):
        return {j.name for j in client.list_custom_jobs(request={"parent": PARENT, "filter": flt})}

    assert names("labels.team=a") == {a.name, b.name}
    assert names('labels.team="a" AND state!="JOB_STATE_SUCCEEDED"') == {a.name}
    assert names("labels.k:*") == {a.name}
    assert names('display_name:"alpha-*"') == {a.name, b.name}
    assert names('NOT display_name="beta"') == {a.name, b.name}
    assert names('state="JOB_STATE_SUCCEEDED" OR display_name="beta"') == {b.name, c.name}
    assert names(f'create_time>"{filters.ns_to_rfc3339(fake_vertex.jobs[a.name].create_ns)}"') == {b.name, c.name}
    for bad in ["colour=red", 'state="RUNNING"', "create_time>yesterday", "labels.team=a AND"]:
        with pytest.raises(gexc.BadRequest):
            names(bad)


def test_list_pages_with_tokens_and_honours_the_read_mask(fake_vertex, client):
    fake_vertex.seed(7, state="JOB_STATE_RUNNING")
    pager = client.list_custom_jobs(request={
        "parent": PARENT, "filter": "labels.trainjobs_job_id:*", "page_size": 3,
        "read_mask": field_mask_pb2.FieldMask(paths=["name", "state", "labels"])})
    pages = list(pager.pages)
    assert [len(p.custom_jobs) for p in pages] == [3, 3, 1]
    assert fake_vertex.calls["list"] == 3
    jobs = [j for p in pages for j in p.custom_jobs]
    assert len({j.name for j in jobs}) == 7
    assert all(j.state == v1.JobState.JOB_STATE_RUNNING and not j.display_name and not j.job_spec.worker_pool_specs
               for j in jobs)
    with pytest.raises(gexc.BadRequest):  # a token belongs to its filter
        client.list_custom_jobs(request={"parent": PARENT, "filter": "labels.x:*",
                                         "page_token": pages[0].next_page_token})


def test_cancel_then_delete_through_the_long_running_operation(fake_vertex, client):
    job = client.create_custom_job(parent=PARENT, custom_job=custom_job())
    with pytest.raises(gexc.BadRequest, match="cancel it before deleting"):  # FAILED_PRECONDITION: HTTP 400
        client.delete_custom_job(name=job.name)
    client.cancel_custom_job(name=job.name)
    assert client.get_custom_job(name=job.name).state == v1.JobState.JOB_STATE_CANCELLING
    assert fake_vertex.complete_cancels() == 1
    ended = client.get_custom_job(name=job.name)
    assert ended.state == v1.JobState.JOB_STATE_CANCELLED and ended.error.code == 1
    with pytest.raises(gexc.BadRequest, match="Cannot cancel"):
        client.cancel_custom_job(name=job.name)
    operation = client.delete_custom_job(name=job.name)
    operation.result(timeout=10)
    assert operation.done()
    with pytest.raises(gexc.NotFound):
        client.get_custom_job(name=job.name)


def test_scripted_errors_then_success_and_call_counts(fake_vertex, client):
    fake_vertex.fail("create", 429)
    with pytest.raises(gexc.TooManyRequests):
        client.create_custom_job(parent=PARENT, custom_job=custom_job(), retry=None)
    client.create_custom_job(parent=PARENT, custom_job=custom_job(), retry=None)
    fake_vertex.fail("get", 403)
    with pytest.raises(gexc.Forbidden):
        client.get_custom_job(name=next(iter(fake_vertex.jobs)), retry=None)
    assert fake_vertex.calls == {"create": 2, "get": 1}
    assert len(fake_vertex.jobs) == 1
    with pytest.raises(gexc.Forbidden):  # another project is not ours
        client.list_custom_jobs(parent=f"projects/other-project/locations/{LOCATION}")


def test_script_runs_a_job_then_succeeds(fake_vertex, client):
    job = client.create_custom_job(parent=PARENT, custom_job=custom_job(labels={"trainjobs-job-id": "j1"}))
    fake_vertex.script("j1", ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    states = []
    while fake_vertex.advance():
        states.append(client.get_custom_job(name=job.name))
    assert [s.state for s in states] == [v1.JobState.JOB_STATE_RUNNING, v1.JobState.JOB_STATE_SUCCEEDED]
    assert states[0].start_time and states[1].end_time >= states[1].start_time
