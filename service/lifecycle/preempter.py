"""The controller's side of a preemption, one backend at a time (the BackendLoop's pass calls it).

For each of the plan's orders: one fenced write (Engine.request_preemption: the victim's
preempt_requested_at and reason, an event on it, the waiting job's nominated_at), committed
before the backend is called, so that a controller that dies between the two leaves a request
its successor sends. Then every victim whose stop this term has not sent yet is stopped: through
the backend's graceful preempt() where its Capabilities say `preempts` (a declared flag) and it
plays the SharesCapacity role (a declared Protocol, checked with isinstance), else through
cancel(). A stop that failed for now (TransientBackendError) is sent again on the
next pass; one sent is never sent twice in a term (nor planned twice: the snapshot counts a
victim as `stopping`)."""
from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from service.lifecycle.admission import PreemptOrder, launched_active
from service.lifecycle.engine import Deposed, Engine
from service.lifecycle.handles import handle_of_row, read_handles
from service.lifecycle.protocol import Backend, PermanentBackendError, SharesCapacity, TransientBackendError
from service.lifecycle.states import JobState
from service.persistence.models import Job

log = logging.getLogger("trainjobs.lifecycle.preempter")


class Preempter:
    def __init__(self, backend: Backend, session_factory: sessionmaker[Session], engine: Engine, *,
                 fence: int | None, grace_seconds: float, batch_size: int = 500) -> None:
        self.backend = backend
        self.session_factory = session_factory
        self.engine = engine
        self.fence = fence
        self.grace_seconds = grace_seconds
        self.batch_size = batch_size
        self.sent: set = set()    # victims whose stop this term has passed on

    def run(self, orders: Sequence[PreemptOrder], resend: bool = True) -> int:
        """Record the orders, then (resend) stop every recorded victim not stopped yet. Returns
        the number of stops sent. Raises Deposed when this controller no longer controls."""
        for order in orders:
            self._record(order)
        return self._send() if resend else 0

    def _record(self, order: PreemptOrder) -> None:
        with self.session_factory() as session:
            try:
                if self.engine.request_preemption(session, order, fence=self.fence):
                    log.info("job %s: preempted for job %s (%s)", order.job_id, order.for_job, order.why)
                session.commit()
            except Deposed:
                session.rollback()
                raise
            except OperationalError:
                session.rollback()
                log.warning("job %s: could not record its preemption; the next pass decides again", order.job_id)

    def _send(self) -> int:
        with self.session_factory() as session:
            rows = read_handles(session, [launched_active(self.backend.name), Job.preempt_requested_at.is_not(None),
                                          Job.state != JobState.CANCELLING.value], limit=self.batch_size)
            session.rollback()
        sent = 0
        for row in rows:
            if row.id in self.sent:
                continue
            handle = handle_of_row(self.session_factory, row)
            try:
                if self.backend.capabilities.preempts and isinstance(self.backend, SharesCapacity):
                    self.backend.preempt(handle, self.grace_seconds)
                else:
                    self.backend.cancel(handle)
            except TransientBackendError as e:
                log.warning("job %s: preemption deferred: %s", row.id, e)
                continue
            except PermanentBackendError as e:
                # It ends however the backend ends it; the engine still records the preemption.
                log.error("job %s: %s refused to stop it for a preemption: %s", row.id, self.backend.name,
                          e.message)
            except Exception:
                log.exception("job %s: stopping it for a preemption failed; next pass", row.id)
                continue
            self.sent.add(row.id)
            sent += 1
        return sent
