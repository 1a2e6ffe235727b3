"""Every call to the Vertex AI JobService, each one attempt through the budget.

The controller never retries inside a call: a pass that meets an outage or a spent
budget moves on, and the next pass tries again, so one backend's trouble never holds
a pass for a whole retry deadline. Lists are paged by hand, so each page is one
budgeted call (the client's pager would fetch further pages on its own)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from google.cloud import aiplatform_v1 as v1
from google.protobuf import field_mask_pb2

from service.backends.vertex import errors
from service.backends.vertex.budget import Bucket, GoogleBudget

T = TypeVar("T")


class JobsApi:
    def __init__(self, client: v1.JobServiceClient, *, parent: str, request_timeout: float,
                 create_timeout: float, page_size: int, budget: GoogleBudget):
        self.client = client
        self.parent = parent
        self.request_timeout = request_timeout
        self.create_timeout = create_timeout
        self.page_size = page_size
        self.budget = budget

    @staticmethod
    def call(bucket: Bucket, fn: Callable[[], T], *, wait: float = 0.0) -> T:
        """One call: a token first (BudgetSpent if none within `wait`), then the call; a
        429 that is a rate limit pauses every call of this kind."""
        bucket.take(wait)
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

    def get(self, name: str) -> v1.CustomJob:
        return self.call(self.budget.crud, lambda: self.client.get_custom_job(
            name=name, retry=None, timeout=self.request_timeout))

    def cancel(self, name: str) -> None:
        self.call(self.budget.crud, lambda: self.client.cancel_custom_job(
            name=name, retry=None, timeout=self.request_timeout))

    def list(self, filter_: str, *, page_size: int | None = None,
             fields: list[str] | None = None) -> Iterator[v1.CustomJob]:
        """The CustomJobs matching `filter_`, page by page (one budgeted call each): a
        caller that stops iterating fetches no further page."""
        token = ""
        while True:
            request = v1.ListCustomJobsRequest(parent=self.parent, filter=filter_,
                                               page_size=page_size or self.page_size, page_token=token)
            if fields:
                request.read_mask = field_mask_pb2.FieldMask(paths=fields)
            pager = self.call(self.budget.crud, lambda request=request: self.client.list_custom_jobs(
                request=request, retry=None, timeout=self.request_timeout))
            # The pager's own iteration would fetch the next page unbudgeted: read this one only.
            yield from pager.custom_jobs
            token = pager.next_page_token
            if not token:
                return
