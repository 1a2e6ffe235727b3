"""The lifecycle's TRAINJOBS_* variables (the controller's passes, its election, a job's stored
progress and error, and the bounds of a template's retry policy); read as part of the one
Settings (service/slices.py)."""
from __future__ import annotations

from pydantic import Field

from service.core.section import Section


class LifecycleEnv(Section):
    """The controller's loop, its election, what it stores of a job, and retry policies' bounds."""

    reconcile_interval_seconds: float = Field(0.5, description="How often the controller runs a pass for each "
                                              "backend (and looks for due model uploads)")
    reconcile_batch_size: int = Field(500, description="Jobs one read of a controller pass takes at most (per "
                                      "backend); the rest wait for a later pass")
    reconcile_wake_gap_seconds: float = Field(
        0.05, ge=0, le=5, description="A submit or cancel wakes the controller at once, but a pass starts at "
                                      "least this long after the previous one ended (after a submit, at least "
                                      "as long as that pass took): a burst of submits costs one pass, not one "
                                      "each (the launch waits at most that much longer)")
    reconcile_replan_seconds: float = Field(
        10.0, ge=0.5, le=300, description="The longest a pass trusts a plan that decided nothing while none of "
                                          "what it reads has changed (lifecycle/quiet.py): what changes with the "
                                          "clock alone (a starvation limit, a minimum runtime, a spending window) "
                                          "is seen this much later at most")
    election_interval_seconds: float = Field(
        2.0, gt=0, le=10, description="How often a process that is not the controller tries to become it "
                                      "(one controller per database; a takeover takes about this long)")
    controller_lease_seconds: float = Field(
        10.0, ge=3, le=600, description="PostgreSQL: a controller whose lock session has been silent this long "
                                        "(a partition, a vanished host) may be deposed: the next process "
                                        "terminates that session and takes over. The controller itself steps "
                                        "down when its session cannot answer within half of it")
    progress_max_bytes: int = Field(16_384, ge=1024, le=1_048_576,
                                    description="A job's stored progress (from replica output) is cut to this")
    error_max_bytes: int = Field(65_536, ge=1024, le=1_048_576,
                                 description="A job's stored error (from replicas or Google) is cut to this")
    retry_max_attempts: int = Field(10, ge=1, le=1000, description="The most attempts a retry policy may ask "
                                    "for (max_attempts above it is a 422 at submit)")
    retry_max_backoff_seconds: float = Field(
        86_400.0, ge=0, le=30 * 86_400, description="The longest backoff a retry policy may ask for "
                                                     "(backoff.initial_seconds or max_seconds above it is a 422)")
