"""Python client for the trainjobs REST API.

    from trainjobs_client import Client
    with Client() as tj:                       # TRAINJOBS_URL / TRAINJOBS_TOKEN or `trainjobs login`
        job = tj.submit("mwms-demo", parameters={"epochs": 3})
        for line in tj.logs(job, follow=True):
            print(line.replica, line.message)
        print(tj.wait(job).state)
"""
__version__ = "0.1.0"

from trainjobs_client._ops import Applied  # noqa: E402
from trainjobs_client.aio import AsyncClient, AsyncLogStream  # noqa: E402
from trainjobs_client.client import Client, LogStream  # noqa: E402
from trainjobs_client.config import DEFAULT_URL, config_path, save_config  # noqa: E402
from trainjobs_client.errors import (  # noqa: E402
                                     Ambiguous,
                                     ApiError,
                                     BackendRefused,
                                     BadRequest,
                                     ConfigError,
                                     Conflict,
                                     ConnectionFailed,
                                     FieldError,
                                     Forbidden,
                                     InvalidRequest,
                                     NoMatch,
                                     NotFound,
                                     PayloadTooLarge,
                                     ServerError,
                                     ServiceUnavailable,
                                     TrainjobsError,
                                     Unauthorized,
                                     WaitTimeout,
)
from trainjobs_client.models import (  # noqa: E402
                                     SWEEP_TERMINAL_STATES,
                                     TERMINAL_STATES,
                                     BackendQueue,
                                     Evaluation,
                                     ImportedTemplate,
                                     ImportWarning,
                                     Job,
                                     JobEvent,
                                     JobPreview,
                                     JobState,
                                     JobSummary,
                                     LogEnd,
                                     LogLine,
                                     LogPage,
                                     Progress,
                                     QueueEntry,
                                     QueuePlace,
                                     Replica,
                                     Sweep,
                                     SweepObjective,
                                     SweepSummary,
                                     TeamLimits,
                                     TeamUsage,
                                     TeamUse,
                                     Template,
                                     TemplateRef,
                                     TemplateSummary,
                                     TemplateVersion,
                                     TokenInfo,
                                     Trial,
)

__all__ = [
    "Client", "AsyncClient", "LogStream", "AsyncLogStream", "Applied",
    "DEFAULT_URL", "config_path", "save_config",
    "TrainjobsError", "ApiError", "FieldError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "PayloadTooLarge", "InvalidRequest", "ServerError", "BackendRefused", "ServiceUnavailable",
    "ConnectionFailed", "ConfigError", "WaitTimeout", "NoMatch", "Ambiguous",
    "Job", "JobSummary", "JobPreview", "JobEvent", "JobState", "TERMINAL_STATES", "LogLine", "LogPage", "LogEnd",
    "Progress", "Evaluation", "Replica", "Template", "TemplateRef", "TemplateSummary", "TemplateVersion",
    "TokenInfo", "TeamLimits", "TeamUsage", "BackendQueue", "QueueEntry", "QueuePlace", "TeamUse",
    "Sweep", "SweepSummary", "SweepObjective", "Trial",
    "SWEEP_TERMINAL_STATES", "ImportedTemplate", "ImportWarning",
]
