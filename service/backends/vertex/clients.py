"""The Vertex backend's connections to Google, made once at start-up: the checked
configuration (config.py), the JobService client and its budgeted calls (jobs_api.py),
the Model Registry client, and the Cloud Logging client over a budgeted session.

All real clients of Google's libraries: tests point them at fakes on 127.0.0.1 that
speak the wire format, never at mocks of these objects."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from google.api_core.client_options import ClientOptions
from google.cloud import aiplatform_v1 as v1
from google.cloud import logging as cloud_logging

from service.backends.vertex import config as vconfig
from service.backends.vertex import logs
from service.backends.vertex.budget import GoogleBudget
from service.backends.vertex.jobs_api import JobsApi
from service.backends.vertex.settings import VertexSettings

log = logging.getLogger("trainjobs.vertex")


@dataclass
class Clients:
    config: vconfig.VertexConfig
    jobs: v1.JobServiceClient
    api: JobsApi
    models: v1.ModelServiceClient
    logging: cloud_logging.Client
    logging_session: logs.BudgetedSession

    def close(self) -> None:
        self.jobs.transport.close()
        self.models.transport.close()
        self.logging.close()


def connect(settings: VertexSettings, budget: GoogleBudget) -> Clients:
    """The clients, or VertexConfigError naming every setting to fix."""
    config, jobs_creds, logging_creds = vconfig.load(settings)
    jobs = v1.JobServiceClient(transport="rest", credentials=jobs_creds,
                               client_options=ClientOptions(api_endpoint=config.api_endpoint))
    api = JobsApi(jobs, parent=config.parent, request_timeout=config.request_timeout,
                  create_timeout=config.create_timeout, page_size=config.page_size, budget=budget)
    # The Model Registry (models.upload after success) answers on the same regional endpoint.
    models = v1.ModelServiceClient(transport="rest", credentials=jobs_creds,
                                   client_options=ClientOptions(api_endpoint=config.api_endpoint))
    session = logs.BudgetedSession(logging_creds, config.request_timeout, budget.logging)
    logging_client = cloud_logging.Client(
        project=config.project, credentials=logging_creds, _use_grpc=False, _http=session,
        client_options={"api_endpoint": config.logging_endpoint})
    log.info("vertex backend: project %s, %s, endpoint %s", config.project, config.location, config.api_endpoint)
    return Clients(config=config, jobs=jobs, api=api, models=models, logging=logging_client,
                   logging_session=session)
