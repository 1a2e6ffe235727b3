"""Every call to the Vertex AI JobService, each one attempt through the budget.

The controller never retries inside a call: a pass that meets an outage or a spent
budget moves on, and the next pass tries again, so one backend's trouble never holds
a pass for a whole retry deadline. Lists are paged by hand, so each page is one
budgeted call (the client's pager would fetch further pages on its own).

On top of the calls: finding a job's CustomJobs by the job-id label (`find_by_label`),
shared by submit (look up before creating again), poll and cancel."""
from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

from google.cloud import aiplatform_v1 as v1
from google.cloud.aiplatform_v1.services.job_service.pagers import ListCustomJobsPager
from google.protobuf import field_mask_pb2

from service.backends.vertex import errors, mapping
from service.backends.vertex.budget import Bucket, GoogleBudget
from service.lifecycle.protocol import JobHandle

T = TypeVar("T")
log = logging.getLogger("trainjobs.vertex")


class JobsApi:
    def __init__(self, client: v1.JobServiceClient, *, parent: str, request_timeout: float,
                 create_timeout: float, page_size: int, budget: GoogleBudget):
        self.client = client
        self.parent = parent
        self.request_timeout = request_timeout
        self.create_timeout = create_timeout
        self.page_size = page_size
        self.budget = budget

    def call(self, bucket: Bucket, fn: Callable[[], T], *, wait: float = 0.0, background: bool = False) -> T:
        """One call: a token first, of `bucket` and of the region's vertex budget (BudgetSpent,
        nothing sent, if none within `wait`; a `background` call leaves the reserve for creates
        and cancels), then the call; a 429 that is a rate limit pauses every call of this kind."""
        self.budget.take(bucket, wait=wait, background=background)
        try:
            result = fn()
        except Exception as e:
            if errors.is_rate_limited(e):
                bucket.throttled()
            raise
        bucket.succeeded()
        return result

    def create(self, custom_job: v1.CustomJob) -> v1.CustomJob:
        # No retry: a retry after a lost answer must look the label up first. The server is
        # told the deadline too (X-Server-Timeout, a Google system parameter for REST calls),
        # so it stops working on a create we no longer wait for.
        return self.call(self.budget.create, lambda: self.client.create_custom_job(
            parent=self.parent, custom_job=custom_job, retry=None, timeout=self.create_timeout,
            metadata=[("x-server-timeout", f"{self.create_timeout:g}")]))

    def get(self, name: str, *, background: bool = False) -> v1.CustomJob:
        return self.call(self.budget.crud, lambda: self.client.get_custom_job(
            name=name, retry=None, timeout=self.request_timeout), background=background)

    def cancel(self, name: str) -> None:
        self.call(self.budget.crud, lambda: self.client.cancel_custom_job(
            name=name, retry=None, timeout=self.request_timeout))

    def list(self, filter_: str, *, page_size: int | None = None,
             fields: list[str] | None = None) -> Iterator[v1.CustomJob]:
        """The CustomJobs matching `filter_`, page by page (one budgeted call each): a
        caller that stops iterating fetches no further page."""
        token = ""
        while True:
            jobs, token = self.page(filter_, token, page_size=page_size, fields=fields)
            yield from jobs
            if not token:
                return

    def page(self, filter_: str, token: str = "", *, page_size: int | None = None, fields: builtins.list[str] | None = None,
             background: bool = False) -> tuple[builtins.list[v1.CustomJob], str]:
        """One page of a listing (one budgeted call): its CustomJobs and the next page's token
        ("" after the last), so that a listing may go on from where the budget stopped it."""
        request = v1.ListCustomJobsRequest(parent=self.parent, filter=filter_,
                                           page_size=page_size or self.page_size, page_token=token)
        if fields:
            request.read_mask = field_mask_pb2.FieldMask(paths=fields)
        pager = self._list_page(request, background)
        # The pager's own iteration would fetch the next page unbudgeted: read this one only.
        return builtins.list(pager.custom_jobs), pager.next_page_token

    def _list_page(self, request: v1.ListCustomJobsRequest, background: bool = False) -> ListCustomJobsPager:
        return self.call(self.budget.crud, lambda: self.client.list_custom_jobs(
            request=request, retry=None, timeout=self.request_timeout), background=background)

    def find_by_label(self, job: JobHandle) -> builtins.list[v1.CustomJob]:
        """Every CustomJob carrying this job's id, the one poll follows first. A job compiled
        before the label key lost its hyphen is looked up by the old key (its CustomJob carries
        that one, and the new one too if created since)."""
        legacy = mapping.is_legacy(job.compiled.custom_job_dict)
        jobs = list(self.list(mapping.label_filter(str(job.id), legacy=legacy), page_size=10,
                              fields=mapping.POLL_FIELDS))
        return sorted(jobs, key=lambda cj: name_key(cj.name))


def name_key(name: str) -> tuple[int, str]:
    """A stable order of CustomJob names: their numeric ids, compared as numbers."""
    numeric = name.rsplit("/", 1)[-1]
    return (len(numeric), numeric)
