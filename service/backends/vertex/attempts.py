"""Launch attempts whose outcome is unknown, and the label lookups made while they settle.

The lifecycle records (and commits) every launch attempt before submit() is called. A
create that timed out, met a 5xx or a crash may still land at Google until the grace
(`vertex_submit_grace_seconds`) has passed since the attempt; until then the job is only
looked up by its label, at most once per `vertex_poll_interval_seconds`. Submit, poll
and cancel all look jobs up, so they share this one record of when each was last
looked up (the controller's thread alone uses it)."""
from __future__ import annotations

from service.backends.vertex import mapping
from service.backends.vertex.clock import Clock
from service.lifecycle.protocol import JobHandle


class LaunchAttempts:
    def __init__(self, clock: Clock, *, grace_seconds: float, lookup_every_seconds: float):
        self.clock = clock
        self.grace_seconds = grace_seconds
        self.lookup_every_seconds = lookup_every_seconds
        self._looked_up: dict[str, float] = {}   # job id -> monotonic time of its last label lookup

    def may_land(self, job: JobHandle) -> bool:
        """An earlier attempt of this job could still create its CustomJob."""
        prev = job.launch_attempted_at
        return prev is not None and (self.clock.wall() - prev).total_seconds() < self.grace_seconds

    @staticmethod
    def never_attempted(job: JobHandle) -> bool:
        """The handle is read before this attempt was recorded: None means no attempt before.
        A job compiled under the old label key may predate the recorded attempts: it is
        always looked up."""
        return (job.launch_attempted_at is None and not job.backend_ref
                and not mapping.is_legacy(job.compiled.custom_job_dict))

    def lookup_due(self, job_id: str) -> bool:
        """No lookup of this job within the last poll interval."""
        last = self._looked_up.get(job_id)
        return last is None or self.clock.mono() - last >= self.lookup_every_seconds

    def looked_up(self, job_id: str) -> None:
        self._looked_up[job_id] = self.clock.mono()

    def forget(self, job_id: str) -> None:
        self._looked_up.pop(job_id, None)

    def clear(self) -> None:
        self._looked_up.clear()
