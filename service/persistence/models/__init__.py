"""ORM tables, one module per concern; every name is also here (`from service.persistence.models
import Job`). The schema is made by Alembic migrations only (migrations/)."""
from service.persistence.models.base import NAMING as NAMING
from service.persistence.models.base import Base as Base
from service.persistence.models.base import UTCDateTime as UTCDateTime

# Re-exported: domain modules stamp rows with the same clock as the column defaults.
from service.persistence.models.base import utcnow as utcnow
from service.persistence.models.capacity import BackendCapacity as BackendCapacity
from service.persistence.models.capacity import PriorityClass as PriorityClass
from service.persistence.models.capacity import TeamShare as TeamShare
from service.persistence.models.jobs import Job as Job
from service.persistence.models.jobs import JobBackend as JobBackend
from service.persistence.models.jobs import JobCost as JobCost
from service.persistence.models.jobs import JobEpoch as JobEpoch
from service.persistence.models.jobs import JobEvent as JobEvent
from service.persistence.models.jobs import JobLabel as JobLabel
from service.persistence.models.jobs import ModelUpload as ModelUpload
from service.persistence.models.service_state import AuditEvent as AuditEvent
from service.persistence.models.service_state import ControllerLease as ControllerLease
from service.persistence.models.service_state import ServiceSecret as ServiceSecret
from service.persistence.models.sweeps import Sweep as Sweep
from service.persistence.models.sweeps import SweepTrial as SweepTrial
from service.persistence.models.teams import ApiToken as ApiToken
from service.persistence.models.teams import Team as Team
from service.persistence.models.teams import TeamLimits as TeamLimits
from service.persistence.models.templates import Template as Template
from service.persistence.models.templates import TemplateVersion as TemplateVersion
from service.persistence.models.usage import UsageBucket as UsageBucket
from service.persistence.models.usage import UsageLedger as UsageLedger
from service.persistence.models.usage import UsageTotal as UsageTotal
from service.persistence.models.webhooks import WebhookAttempt as WebhookAttempt
from service.persistence.models.webhooks import WebhookDelivery as WebhookDelivery
from service.persistence.models.webhooks import WebhookSubscription as WebhookSubscription
