"""The model upload after a Vertex job SUCCEEDED (template `model_upload`; issue 26, point 1).

Once per job, across controller restarts and takeovers:
- The row (models.ModelUpload) is made in the transaction that records SUCCEEDED (an engine
  listener, `on_change`), so no success is missed and none is queued twice.
- The controller works through due rows after its pass (`ModelUploader.run`), a few a pass
  (TRAINJOBS_VERTEX_MODEL_UPLOADS_PER_PASS). Every attempt is counted and committed before the
  call. After one, the Model Registry is looked up by the job-id label (models.list
  `labels.trainjobs_job_id="<id>"`) before uploading again; and the upload names its Model ID
  (`trainjobs-<job id>`, UploadModelRequest.modelId), so an upload that landed after all is
  409 ALREADY_EXISTS at Google rather than a second Model.
- The outcome is an event of the job (SUCCEEDED -> SUCCEEDED, actor "model-upload") and the job
  view's `model_upload`; a failed upload never changes the job's state.

The Model: displayName (the template's, else the job's), artifactUri = AIP_MODEL_DIR
(`<base output directory>/model/`, where the trainer saved it), containerSpec.imageUri = the
serving image, labels = the template's plus the job-id label."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from google.api_core import exceptions as gexc
from google.cloud import aiplatform_v1 as v1
from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from service.backends.vertex import errors
from service.backends.vertex.budget import BudgetSpent
from service.backends.vertex.model_queue import ACTIVE, ACTOR, model_id, plan_of  # noqa: F401
from service.jobspec import CompiledJob
from service.jobspec.reserved import JOB_ID_LABEL
from service.lifecycle.states import JobState
from service.persistence.models import Job, JobEvent, ModelUpload

if TYPE_CHECKING:   # the backend owns its uploader: a type only, no import cycle at run time
    from service.backends.vertex.backend import VertexBackend

log = logging.getLogger("trainjobs.vertex.models")

class ModelUploader:
    def __init__(self, backend: VertexBackend) -> None:
        self.backend = backend   # its settings, config, budget, clients and clock

    @property
    def client(self) -> v1.ModelServiceClient:
        return self.backend.model_client

    def run(self, session_factory: sessionmaker[Session]) -> int:
        """Work through the due uploads (a few a pass); returns how many were tried."""
        s = self.backend.settings
        now = self.backend.clock.wall()
        with session_factory() as session:
            rows = session.execute(
                select(ModelUpload.job_id, ModelUpload.attempts, Job.compiled, Job.display_name)
                .join(Job, Job.id == ModelUpload.job_id)
                .where(ModelUpload.state.in_(ACTIVE), ModelUpload.next_at <= now)
                .order_by(ModelUpload.next_at).limit(s.vertex_model_uploads_per_pass)).all()
            session.rollback()
        for r in rows:
            try:
                self._one(session_factory, r, now)
            except BudgetSpent:
                return len(rows)   # the budget is spent: every other call would be refused too
            except Exception:  # one job's trouble never stops the others
                log.exception("job %s: model upload step failed; next pass", r.job_id)
        return len(rows)

    # -----------------------------------------------------------------------------------------
    def _one(self, session_factory, r, now: datetime) -> None:
        s = self.backend.settings
        jid = str(r.job_id)
        retry_at = now + timedelta(seconds=s.vertex_model_upload_retry_seconds)
        if r.attempts > 0:
            try:
                found = self._lookup(jid)
            except BudgetSpent:
                raise
            except Exception as e:
                if errors.is_google_error(e) and not errors.is_transient(e):
                    return self._finish(session_factory, r.job_id, now, failed=True,
                                        message=f"looking the model up by its label: {_said(e)}")
                return self._set(session_factory, r.job_id, now, next_at=retry_at,
                                 message=f"looking the model up by its label: {_said(e)}; trying again")
            if found is not None:
                return self._finish(session_factory, r.job_id, now, model=found,
                                    message="found by its job-id label: an earlier upload landed")
        if r.attempts >= s.vertex_model_upload_max_attempts:
            return self._finish(session_factory, r.job_id, now, failed=True,
                                message=f"gave up after {r.attempts} attempts "
                                        "(TRAINJOBS_VERTEX_MODEL_UPLOAD_MAX_ATTEMPTS)")
        model = self._model(jid, CompiledJob.from_json(r.compiled), r.display_name)
        if model is None:
            return self._finish(session_factory, r.job_id, now, failed=True,
                                message="the job has no output directory, so no saved model to upload")
        # Counted and committed before the call: a lost answer is looked up, never simply repeated.
        self._set(session_factory, r.job_id, now, state="uploading", attempts=r.attempts + 1, next_at=retry_at)
        try:
            name = self._upload(jid, model)
        except BudgetSpent:
            self._set(session_factory, r.job_id, now, attempts=r.attempts, next_at=now)  # nothing was sent
            raise
        except gexc.Conflict:   # 409 ALREADY_EXISTS: our Model ID is taken, by our own earlier upload
            name = f"{self.backend.cfg.parent}/models/{model_id(jid)}"
        except Exception as e:
            if errors.is_google_error(e) and not errors.is_transient(e):
                return self._finish(session_factory, r.job_id, now, failed=True, message=_said(e))
            if not errors.is_google_error(e):
                log.exception("job %s: model upload raised", jid)
            return self._set(session_factory, r.job_id, now, message=f"{_said(e)}; looking it up, then trying "
                                                                     "again")
        self._finish(session_factory, r.job_id, now, model=name, message="uploaded")

    def _model(self, jid: str, compiled: CompiledJob, display_name: str) -> v1.Model | None:
        plan = (compiled.vertex or {}).get("model_upload") or {}
        base = self.backend.effective(jid, compiled).base_output_directory
        if not base:
            return None
        return v1.Model(display_name=plan.get("display_name") or display_name,
                        artifact_uri=f"{base.rstrip('/')}/model/",
                        container_spec=v1.ModelContainerSpec(image_uri=plan["serving_container_image_uri"]),
                        labels={**(plan.get("labels") or {}), JOB_ID_LABEL: jid})

    def _upload(self, jid: str, model: v1.Model) -> str:
        b = self.backend
        timeout = b.cfg.create_timeout

        def call():
            op = self.client.upload_model(
                request=v1.UploadModelRequest(parent=b.cfg.parent, model=model, model_id=model_id(jid)),
                retry=None, timeout=timeout)
            # The fake (and a quick Google) answers done; otherwise the label lookup finds it later.
            if not op.done():
                raise gexc.DeadlineExceeded(f"upload operation {op.operation.name} still running")
            return op.result(timeout=0).model
        return b.calls.call(b.budget.create, call)

    def _lookup(self, jid: str) -> str | None:
        b = self.backend
        pager = b.calls.call(b.budget.crud, lambda: self.client.list_models(
            request=v1.ListModelsRequest(parent=b.cfg.parent, filter=f'labels.{JOB_ID_LABEL}="{jid}"', page_size=10),
            retry=None, timeout=b.cfg.request_timeout))
        for m in pager.models:   # one page: a job has at most one Model with its label
            return m.name
        return None

    # -----------------------------------------------------------------------------------------
    @staticmethod
    def _set(session_factory, job_id, now: datetime, **values) -> None:
        with session_factory() as session:
            session.execute(update(ModelUpload).where(ModelUpload.job_id == job_id,
                                                      ModelUpload.state.in_(ACTIVE))
                            .values(updated_at=now, **values))
            session.commit()

    def _finish(self, session_factory, job_id, now: datetime, *, model: str | None = None,
                failed: bool = False, message: str) -> None:
        state = "failed" if failed else "succeeded"
        reason = (f"model upload failed: {message}; the job stays SUCCEEDED" if failed
                  else f"model uploaded to the Vertex AI Model Registry: {model} ({message})")
        with session_factory() as session:
            done = session.execute(update(ModelUpload).where(ModelUpload.job_id == job_id,
                                                             ModelUpload.state.in_(ACTIVE))
                                   .values(state=state, model=model, message=message[:2000], updated_at=now))
            if done.rowcount == 1:   # once: a second controller finishing it too writes nothing
                session.execute(insert(JobEvent).values(job_id=job_id, from_state=JobState.SUCCEEDED.value,
                                                        to_state=JobState.SUCCEEDED.value, reason=reason[:2000],
                                                        actor=ACTOR, at=now))
            session.commit()
        (log.warning if failed else log.info)("job %s: %s", job_id, reason)


def _said(e: BaseException) -> str:
    code, message, status = errors.google_error(e)
    return f"Vertex AI answered {code} {status or ''}: {message}".replace("  ", " ") if code else str(e)
