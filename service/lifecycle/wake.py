"""Waking the controller: the one place that knows the channel and the payloads.

A write that gives the controller work (a new job, a cancel, a webhook, a sweep) wakes
it after commit instead of leaving it to its interval. Two ways, one meaning:

- in this process (`Waker.wake`): the controller's loops, if this process controls the
  database, are woken directly;
- in the others (PostgreSQL NOTIFY on `CHANNEL`, delivered at commit like the rows): the
  controlling process's leadership connection LISTENs (lifecycle.leader) and hands each
  payload to `Controller.wake`, which reads it with `parse`.

A process that controls the database wakes its own loops and sends no NOTIFY (it would
only come back to itself); one that does not sends the NOTIFY in the writing transaction
(`Waker.notify_needed`). A wake names whose loop (a backend, or a loop service such as
"sweeps") and whether admission is enough (a new job) or a full pass is needed (a cancel).
SQLite has no NOTIFY: there the controller's interval is the only cross-process wake-up."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.orm import Session

from service.persistence.jobrows import PgAlso

CHANNEL = "trainjobs_wake"     # LISTENed by the controlling process (lifecycle.leader)
ADMIT_SUFFIX = ":admit"        # payload suffix: a new job, for which admission is enough


@dataclass(frozen=True)
class Wake:
    """Whose loop to wake (`target`: a backend's or a loop service's name; None: all) and
    whether admission alone is enough (a new job) or a full pass is needed."""

    target: str | None = None
    admit_only: bool = False

    @classmethod
    def admission(cls, backend: str) -> Wake:
        return cls(backend, admit_only=True)

    def payload(self) -> str:
        return (self.target or "") + (ADMIT_SUFFIX if self.admit_only else "")


def parse(payload: str) -> Wake:
    """A NOTIFY payload (`Wake.payload`) back into a Wake."""
    if payload.endswith(ADMIT_SUFFIX):
        return Wake(payload[:-len(ADMIT_SUFFIX)] or None, admit_only=True)
    return Wake(payload or None)


_NOTIFY_EXPR = "pg_notify(:wake_channel, :wake_payload)"


def notify_expr(wake: Wake) -> PgAlso:
    """The NOTIFY as an expression the job-row writer selects in its own statement
    (persistence.jobrows.insert_job): the submit stays one round trip on PostgreSQL."""
    return PgAlso(_NOTIFY_EXPR, {"wake_channel": CHANNEL, "wake_payload": wake.payload()})


_NOTIFY = text("SELECT " + _NOTIFY_EXPR)


def notify_on_commit(session: Session, wake: Wake) -> None:
    """Tell the other processes, when this transaction commits (PostgreSQL; nothing on SQLite)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_NOTIFY, {"wake_channel": CHANNEL, "wake_payload": wake.payload()})


def notify_controller(session: Session, target: str) -> None:
    """`notify_on_commit` for a full pass of `target`'s loop (a backend or a loop service)."""
    notify_on_commit(session, Wake(target))


class Controlling(Protocol):
    """What the waker needs of this process's controller (lifecycle.controller.Controller)."""

    @property
    def active(self) -> bool: ...

    def wake(self, backend: str | None = None, admit_only: bool = False) -> None: ...


class Waker:
    """This process's side of waking: built once per app around its controller."""

    def __init__(self, controller: Controlling | None = None) -> None:
        self.controller = controller

    @property
    def notify_needed(self) -> bool:
        """True unless this process controls the database (then its own loops are woken
        in-process, and a NOTIFY would only come back to it)."""
        return self.controller is None or not self.controller.active

    def on_commit(self, session: Session, wake: Wake) -> None:
        """Inside the writing transaction: the NOTIFY for the other processes, if needed."""
        if self.notify_needed:
            notify_on_commit(session, wake)

    def also(self, wake: Wake) -> PgAlso | None:
        """`on_commit` for the job-row writer's single statement (None: no NOTIFY)."""
        return notify_expr(wake) if self.notify_needed else None

    def after(self, wake: Wake) -> None:
        """After commit: wake this process's loops (nothing if it does not control)."""
        if self.controller is not None:
            self.controller.wake(wake.target, wake.admit_only)

    def wake(self, target: str | None = None, admit_only: bool = False) -> None:
        """`after(Wake(target, admit_only))`, with the arguments routers pass (a full pass
        unless `admit_only`)."""
        self.after(Wake(target, admit_only))

