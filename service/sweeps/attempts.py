"""A trial's job goes on in its attempts: a retry after a failure, a preemption's new attempt
(service/lifecycle/retries.py), each a job of its own pointing at the first (jobs.retry_of).
What a sweep asks of a trial (has it ended, did it succeed, is it running, stop it) it asks of
the latest attempt: a trial whose first attempt was preempted and whose second runs is running,
not failed (it used to count as ended: the sweep started more trials than max_parallel, counted
a failure, and could end while the trial still ran)."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from service.persistence.models import Job, SweepTrial

_LATER = aliased(Job)

# The id of the trial's latest attempt (its own job where none followed), for a join on Job.id.
CURRENT_JOB = func.coalesce(
    select(_LATER.id).where(_LATER.retry_of == SweepTrial.job_id).order_by(_LATER.attempt.desc()).limit(1)
    .correlate(SweepTrial).scalar_subquery(),
    SweepTrial.job_id)
