"""The vertex backend's configuration, checked once at start-up.

Every problem is reported at once, naming the environment variable to fix, so a
misconfigured service fails when it starts rather than at its first job."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import google.auth
from google.auth.credentials import AnonymousCredentials, Credentials
from google.auth.exceptions import DefaultCredentialsError

from service.backends.vertex.settings import VertexSettings

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# Settings that were renamed: a deployment that still sets one is told, not silently ignored.
RENAMED = {"TRAINJOBS_VERTEX_CRUD_PER_MINUTE": "TRAINJOBS_VERTEX_CALLS_PER_MINUTE",
           "TRAINJOBS_VERTEX_CRUD_BURST": "TRAINJOBS_VERTEX_CALLS_BURST"}
_PROJECT = re.compile(r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{6,20})$")  # an id or a number
_LOCATION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")                          # us-central1, europe-west4
_SERVICE_ACCOUNT = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]+$")


class VertexConfigError(RuntimeError):
    """The vertex backend cannot start; the message lists every problem and its fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("vertex backend is misconfigured:\n  - " + "\n  - ".join(problems))


@dataclass(frozen=True)
class VertexConfig:
    project: str
    location: str
    api_endpoint: str          # a URL with its scheme
    logging_endpoint: str      # a URL with its scheme
    base_output_directory: str | None
    service_account: str | None
    request_timeout: float
    create_timeout: float
    retry_deadline: float
    retry_initial: float
    submit_grace: float
    page_size: int

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    def console_url(self, name: str) -> str:
        numeric = name.rsplit("/", 1)[-1]
        return (f"https://console.cloud.google.com/vertex-ai/locations/{self.location}"
                f"/training/{numeric}/cpu?project={self.project}")


def is_plain_http(url: str) -> bool:
    return url.startswith("http://")


def _endpoint(raw: str | None, default: str, env: str, problems: list[str]) -> str:
    url = (raw or default).strip().rstrip("/")
    if "://" not in url:
        url = "https://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
        problems.append(f"{env}={raw!r} is not an API endpoint; give a host "
                        f"(e.g. {default}) or a URL like http://127.0.0.1:8080 for a local fake")
    return url


def load(settings: VertexSettings) -> tuple[VertexConfig, Credentials | None, Credentials | None]:
    """(config, credentials for Vertex AI, credentials for Cloud Logging), or VertexConfigError.

    Credentials are Application Default Credentials, except for a plain-http
    endpoint (a local fake or emulator): that one gets anonymous credentials,
    so no token of ours ever travels unencrypted.

    One function (over 60 lines) on purpose: it checks every setting and gathers every
    problem into one list, so an operator reads them all at once."""
    problems: list[str] = []
    location = (settings.vertex_location or "").strip()
    if not _LOCATION.match(location):
        problems.append(f"TRAINJOBS_VERTEX_LOCATION={settings.vertex_location!r} is not a Vertex AI region; "
                        "use one such as us-central1 or europe-west4")
    api = _endpoint(settings.vertex_api_endpoint, f"{location}-aiplatform.googleapis.com",
                    "TRAINJOBS_VERTEX_API_ENDPOINT", problems)
    logs = _endpoint(settings.logging_api_endpoint, "logging.googleapis.com",
                     "TRAINJOBS_LOGGING_API_ENDPOINT", problems)
    base = settings.vertex_base_output_directory
    if base and not base.startswith("gs://"):
        problems.append(f"TRAINJOBS_VERTEX_BASE_OUTPUT_DIRECTORY={base!r}: Vertex AI writes outputs to "
                        "Cloud Storage; use a gs://bucket/prefix URI")
    sa = settings.vertex_service_account
    if sa and not _SERVICE_ACCOUNT.match(sa):
        problems.append(f"TRAINJOBS_VERTEX_SERVICE_ACCOUNT={sa!r} is not a service account email "
                        "(name@project.iam.gserviceaccount.com)")
    # A submit is a lookup (request timeout) then at most one create (create timeout), after
    # the attempt was recorded. Until the grace has passed since an attempt, no controller
    # creates the job again: it must outlast the longest submit, with as much again for
    # clock skew between controllers and Google's own lag. 0 turns the wait off altogether:
    # only for a fake or an emulator that answers at once.
    longest_submit = settings.vertex_request_timeout_seconds + settings.vertex_create_timeout_seconds
    needed = 2 * longest_submit
    if 0 < settings.vertex_submit_grace_seconds < needed:
        problems.append(f"TRAINJOBS_VERTEX_SUBMIT_GRACE_SECONDS={settings.vertex_submit_grace_seconds:g} is "
                        f"too short for the longest submit ({longest_submit:g} s: a lookup within "
                        "TRAINJOBS_VERTEX_REQUEST_TIMEOUT_SECONDS, then a create within "
                        "TRAINJOBS_VERTEX_CREATE_TIMEOUT_SECONDS); a create could land after the next attempt "
                        f"began. Set it to at least twice that, {needed:g}, or shorten the create timeout")

    for old, new in RENAMED.items():
        if old in os.environ:
            problems.append(f"{old} is no longer read: one budget now covers every Vertex AI call in the region "
                            f"(creates, gets, lists, cancels, model uploads); set {new} instead")

    project = (settings.vertex_project or "").strip()
    adc: Credentials | None = None
    adc_project = None
    endpoints_ok = not any(p.startswith(("TRAINJOBS_VERTEX_API_ENDPOINT", "TRAINJOBS_LOGGING_API_ENDPOINT"))
                           for p in problems)
    if endpoints_ok and not (is_plain_http(api) and is_plain_http(logs)):
        try:
            adc, adc_project = google.auth.default(scopes=SCOPES)
        except DefaultCredentialsError as e:
            problems.append(f"no Application Default Credentials for {api if not is_plain_http(api) else logs}: {e} "
                            "Run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, "
                            "or run on Google Cloud with a service account")
    project = project or (adc_project or "")
    if not project:
        problems.append("TRAINJOBS_VERTEX_PROJECT is not set (and Application Default Credentials name "
                        "no project); set it to the Google Cloud project that runs the jobs")
    elif not _PROJECT.match(project):
        problems.append(f"TRAINJOBS_VERTEX_PROJECT={project!r} is not a project id (6-30 lowercase letters, "
                        "digits and hyphens, starting with a letter) or a project number")
    if problems:
        raise VertexConfigError(problems)
    config = VertexConfig(project=project, location=location, api_endpoint=api, logging_endpoint=logs,
                          base_output_directory=base.rstrip("/") if base else None, service_account=sa or None,
                          request_timeout=settings.vertex_request_timeout_seconds,
                          create_timeout=settings.vertex_create_timeout_seconds,
                          retry_deadline=settings.vertex_retry_deadline_seconds,
                          retry_initial=settings.vertex_retry_initial_seconds,
                          submit_grace=settings.vertex_submit_grace_seconds,
                          page_size=settings.vertex_list_page_size)
    anonymous = AnonymousCredentials()
    return (config, anonymous if is_plain_http(api) else adc, anonymous if is_plain_http(logs) else adc)
