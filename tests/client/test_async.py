"""The async client: the same operations, awaited, against the real service."""
from __future__ import annotations

import pytest

from tests.client.conftest import TINY_PARAMETERS, tiny_spec
from trainjobs_client import AsyncClient, Conflict, InvalidRequest, JobState, NotFound

pytestmark = pytest.mark.anyio


async def test_submit_follow_wait_list_templates(server, token):
    async with AsyncClient(server, token, backoff=0.01) as tj:
        created = await tj.templates.create("tiny", tiny_spec(), TINY_PARAMETERS, description="v1")
        assert created.version == 1
        job = await tj.submit("tiny", {"epochs": 2})
        stream = tj.logs(job, follow=True)
        lines = [line async for line in stream]
        assert stream.end.state is JobState.SUCCEEDED
        assert {ln.replica for ln in lines} == {"workerpool0-0", "workerpool1-0"}
        assert [ln.message for ln in lines if ln.replica == "workerpool0-0"][-1] == "tag=x"
        done = await tj.wait(job, timeout=60)
        assert done.state is JobState.SUCCEEDED and done.progress.epoch == 2
        assert sorted([ln.message async for ln in tj.logs(job, page_size=3)]) == sorted(ln.message for ln in lines)
        assert [e.to_state for e in await tj.events(job)][-1] is JobState.SUCCEEDED
        assert [j.id async for j in tj.list(page_size=1)] == [job.id]
        assert [t.name async for t in tj.templates.list()] == ["tiny"]
        assert (await tj.get(job.id)).id == job.id
        assert (await tj.whoami()).team == "alpha"
        with pytest.raises(Conflict):
            await tj.cancel(job)
        again = await tj.relaunch(job, parameters={"epochs": 1}, template_version="latest")
        assert again.relaunch_of == job.id and again.parameters == {"epochs": 1}
        assert (await tj.wait(again, timeout=60)).state is JobState.SUCCEEDED
        with pytest.raises(InvalidRequest) as bad:
            await tj.preview("tiny", {"epochs": 0})
        assert bad.value.errors[0].field == "parameters.epochs"
        with pytest.raises(NotFound):
            await tj.templates.get("nope")
