"""The model uploads the controller runs (a loop service, beside the backend loops).

Once per job, across controller restarts and takeovers:
- The row is made in the transaction that records SUCCEEDED (queue.UploadQueue), so no
  success is missed and none is queued twice.
- Each pass works through a few due rows (TRAINJOBS_VERTEX_MODEL_UPLOADS_PER_PASS). Every
  attempt is counted and committed before the call. After one, the registry is looked up by
  the job-id label (the client's `find`) before uploading again; and the client uploads under
  a model id of the job's own, so an upload that landed after all is that model, not a second.
- The outcome is an event of the job (SUCCEEDED -> SUCCEEDED, actor "model-upload") and the
  job view's `model_upload`; a failed upload never changes the job's state."""
from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from service.core.clock import utcnow
from service.core.text import plural
from service.jobspec import CompiledJob
from service.lifecycle.protocol import BudgetExhausted, ModelClient, PermanentBackendError, TransientBackendError
from service.lifecycle.services import LoopService
from service.lifecycle.states import JobState
from service.model_uploads.queue import ACTIVE, ACTOR
from service.model_uploads.settings import UploadSettings
from service.persistence.models import Job, JobEvent, ModelUpload

log = logging.getLogger("trainjobs.model_uploads")


class ModelUploads(LoopService):
    name = "model-uploads"

    def __init__(self, session_factory: sessionmaker[Session], clients: Mapping[str, ModelClient],
                 settings: UploadSettings) -> None:
        super().__init__(interval=settings.interval)
        self.session_factory = session_factory
        self.clients = clients      # backend name -> its model client
        self.settings = settings

    def run_once(self) -> bool:
        """Work through the due uploads (a few a pass)."""
        if not self.clients:
            return False
        now = utcnow()
        with self.session_factory() as session:
            rows = session.execute(
                select(ModelUpload.job_id, ModelUpload.attempts, Job.backend, Job.compiled, Job.display_name)
                .join(Job, Job.id == ModelUpload.job_id)
                .where(ModelUpload.state.in_(ACTIVE), ModelUpload.next_at <= now)
                .order_by(ModelUpload.next_at).limit(self.settings.per_pass)).all()
            session.rollback()
        for r in rows:
            client = self.clients.get(r.backend)
            if client is None:
                continue   # its backend is not enabled here: the row waits for a service that has it
            try:
                self._one(client, r, now)
            except BudgetExhausted:
                return False   # the budget is spent: every other call would be refused too
            except Exception:  # one job's trouble never stops the others
                log.exception("job %s: model upload step failed; next pass", r.job_id)
        return False

    def _one(self, client: ModelClient, r: Any, now: datetime) -> None:
        jid = str(r.job_id)
        retry_at = now + timedelta(seconds=self.settings.retry_seconds)
        if r.attempts > 0 and self._found_earlier(client, r.job_id, now, retry_at):
            return
        if r.attempts >= self.settings.max_attempts:
            return self._finish(r.job_id, now, failed=True,
                                message=f"gave up after {plural(r.attempts, 'attempt')} "
                                        "(TRAINJOBS_VERTEX_MODEL_UPLOAD_MAX_ATTEMPTS)")
        plan = client.plan(jid, CompiledJob.from_json(r.compiled), r.display_name)
        if plan is None:
            return self._finish(r.job_id, now, failed=True,
                                message="the job has no output directory, so no saved model to upload")
        # Counted and committed before the call: a lost answer is looked up, never simply repeated.
        self._set(r.job_id, now, state="uploading", attempts=r.attempts + 1, next_at=retry_at)
        try:
            name = client.upload(jid, plan)
        except BudgetExhausted:
            self._set(r.job_id, now, attempts=r.attempts, next_at=now)  # nothing was sent
            raise
        except PermanentBackendError as e:
            return self._finish(r.job_id, now, failed=True, message=e.message)
        except TransientBackendError as e:
            return self._set(r.job_id, now, message=f"{e}; looking it up, then trying again")
        self._finish(r.job_id, now, model=name, message="uploaded")

    def _found_earlier(self, client: ModelClient, job_id: uuid.UUID, now: datetime, retry_at: datetime) -> bool:
        """After an attempt whose answer may have been lost: the model it made, if any, is the
        job's (recorded here; True: nothing more to do this pass)."""
        try:
            found = client.find(str(job_id))
        except PermanentBackendError as e:
            self._finish(job_id, now, failed=True, message=f"looking the model up by its label: {e.message}")
            return True
        except BudgetExhausted:
            raise
        except TransientBackendError as e:
            self._set(job_id, now, next_at=retry_at, message=f"looking the model up by its label: {e}; trying again")
            return True
        if found is None:
            return False
        self._finish(job_id, now, model=found, message="found by its job-id label: an earlier upload landed")
        return True

    def _set(self, job_id: uuid.UUID, now: datetime, **values: Any) -> None:
        with self.session_factory() as session:
            session.execute(update(ModelUpload).where(ModelUpload.job_id == job_id, ModelUpload.state.in_(ACTIVE))
                            .values(updated_at=now, **values))
            session.commit()

    def _finish(self, job_id: uuid.UUID, now: datetime, *, model: str | None = None, failed: bool = False,
                message: str) -> None:
        state = "failed" if failed else "succeeded"
        reason = (f"model upload failed: {message}; the job stays SUCCEEDED" if failed
                  else f"model uploaded to the Vertex AI Model Registry: {model} ({message})")
        with self.session_factory() as session:
            done = cast(CursorResult, session.execute(update(ModelUpload).where(ModelUpload.job_id == job_id,
                                                             ModelUpload.state.in_(ACTIVE))
                                   .values(state=state, model=model, message=message[:2000], updated_at=now)))
            if done.rowcount == 1:   # once: a second controller finishing it too writes nothing
                session.execute(insert(JobEvent).values(job_id=job_id, from_state=JobState.SUCCEEDED.value,
                                                        to_state=JobState.SUCCEEDED.value, reason=reason[:2000],
                                                        actor=ACTOR, at=now))
            session.commit()
        (log.warning if failed else log.info)("job %s: %s", job_id, reason)
