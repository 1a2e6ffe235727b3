"""The jobs list and the job page (and its live panels), cancel, log download."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse

from service.core.errors import DomainError
from service.jobs import epochs as epoch_history
from service.jobs import queries
from service.jobs import service as jobs
from service.jobs.preemption_history import preemptions_of
from service.jobs.queue_place import queue_place, queue_places
from service.jobspec import CompiledJob
from service.lifecycle.handles import handle_of_job
from service.lifecycle.states import TERMINAL, JobState
from service.logs import service as logs
from service.templates import service as templates
from service.templates.schemas import TEMPLATE_NAME_PATTERN
from service.ui import charts, views
from service.ui.deps import Form, Member, UiUser, User
from service.ui.feed import change_of
from service.ui.render import render, render_fragment
from service.ui.routing import HtmlRoute
from service.ui.settings import refresh_ms
from service.ui.severity import severities
from service.web.container import SessionDep, services
from service.web.security_headers import SECURITY_HEADERS

router = APIRouter(prefix="/ui", route_class=HtmlRoute, include_in_schema=False)
LABEL_PATTERN = r"^[a-z][a-z0-9_-]{0,62}(=[a-z0-9_-]{0,63})?$"  # as GET /v1/jobs?label=
NOTICES = {"cancel": "Cancel requested.",   # the live "Cancelling" / "Cancelled" box says the rest
           "launched": "Job launched."}
NOTICE_COOKIE = "trainjobs_notice"


def with_notice(job_id: uuid.UUID, notice: str) -> RedirectResponse:
    """To the job's page, saying `notice` once: a cookie for that page only, read and cleared
    by it, so the address stays clean (no `?notice=` to repeat on reload), with or without
    JavaScript."""
    resp = RedirectResponse(f"/ui/jobs/{job_id}", status_code=303, headers=SECURITY_HEADERS)
    resp.set_cookie(NOTICE_COOKIE, notice, max_age=60, path=f"/ui/jobs/{job_id}", httponly=True, samesite="strict")
    return resp


@router.get("")
@router.get("/")
def home():
    return RedirectResponse("/ui/jobs", status_code=303, headers=SECURITY_HEADERS)


@router.get("/jobs")
def jobs_page(request: Request, session: SessionDep, user: User,
              state: Annotated[list[JobState], Query()] = [],
              template: Annotated[str | None, Query(pattern=f"^$|{TEMPLATE_NAME_PATTERN}")] = None,
              label: Annotated[str | None, Query(pattern=f"^$|{LABEL_PATTERN}")] = None,
              cursor: Annotated[str | None, Query(max_length=512)] = None,
              q: Annotated[str | None, Query(max_length=200)] = None,
              mine: Annotated[bool, Query()] = False):
    ui = services(request).ui_settings
    q = (q or "").strip()
    rows, next_cursor = jobs.list_jobs(session, user.actor.team_id, states=state, template=template or None,
                                       labels=[label] if label else [], created_after=None, created_before=None,
                                       limit=ui.page_size, cursor=cursor or None, text=q or None,
                                       created_by=user.actor.name if mine else None)
    # The progress column is deferred by the list query: read only its two numbers.
    live = {r.id: change_of(r) for r in queries.changes_of(session, user.actor.team_id, [j.id for j in rows])}
    # A waiting job's place in its backend's queue (the queue's cached computation, per backend).
    svc = services(request)
    places = {j.id: queue_place(svc.queue, svc.backends, j) for j in rows if j.state == JobState.QUEUED.value}
    names = [t.name for t, _ in templates.list_templates(session, user.actor.team_id, include_archived=True,
                                                          limit=200, cursor=None)[0]]
    return render(request, "jobs.html", user=user, jobs=rows, live=live, places=places, next_cursor=next_cursor,
                  chosen_states=[s.value for s in state], template=template or "", label=label or "",
                  template_names=names, paged=bool(cursor), q=q, mine=mine,
                  filtered=bool(state or template or label or q or mine))


def _latest_version(session: SessionDep, user: UiUser, name: str) -> int | None:
    """The template's newest version, for "Launch again" to say when the job's is older."""
    try:
        return templates.get_template(session, user.actor.team_id, name).latest_version
    except DomainError:
        return None


def job_context(request: Request, session: SessionDep, user: UiUser, job_id: uuid.UUID) -> dict:
    job, attempts = jobs.job_and_attempts(session, user.actor.team_id, job_id)
    compiled = CompiledJob.from_json(job.compiled)
    rows = epoch_history.list_epochs(session, job.id)
    view = jobs.launch_view(services(request).backends, job.backend, job.id, compiled, job.backend_ref)
    return dict(user=user, job=job, final=JobState(job.state) in TERMINAL, pools=views.pools(compiled),
                chain=views.attempt_chain(job, attempts),
                preempted=queries.preempted(job.state, (job.error or {}).get("cause") if isinstance(job.error, dict)
                                            else None),
                latest_version=_latest_version(session, user, job.template_name),
                replicas=views.replicas(job, compiled), logdir=views.tensorboard_dir(view),
                output_dir=view.host_output_dir, wish=views.wish(job.wish),
                progress=views.progress_summary(job.progress), epochs=rows, charts=charts.build(rows),
                events=jobs.list_events(session, user.actor.team_id, job.id),
                preemptions=preemptions_of(session, user.actor.team_id, attempts),
                live=change_of(queries.change_of_job(job)),
                queue_place=queue_place(services(request).queue, services(request).backends, job),
                queue_places=queue_places(services(request).queue, services(request).backends, job),
                refresh_ms=refresh_ms(services(request).queue.seconds))


def _log_tail(request: Request, ctx: dict, replica: str | None) -> dict:
    """The first lines of the logs, so the page shows them without JavaScript."""
    job = ctx["job"]
    limit = services(request).ui_settings.log_tail_lines
    view = logs.JobView(handle_of_job(job), job.backend, job.error)
    try:
        page = logs.read(logs.backend_of(services(request).backends, view), view.handle, replica, None, limit)
    except DomainError as e:
        return dict(lines=[], severity=[], cursor=None, more=False, log_error=e.detail)
    return dict(lines=page.lines, severity=severities(page.lines), cursor=page.cursor,
                more=len(page.lines) >= limit, log_error=None)


@router.get("/jobs/{job_id}")
def job_page(job_id: uuid.UUID, request: Request, session: SessionDep, user: User,
             replica: Annotated[str | None, Query(max_length=64)] = None,
             notice: Annotated[str | None, Query(max_length=32)] = None):
    ctx = job_context(request, session, user, job_id)
    if replica and replica not in {r.task_name for r in ctx["replicas"]}:
        replica = None
    flash = request.cookies.get(NOTICE_COOKIE)
    resp = render(request, "job.html", **ctx, replica=replica, logs=_log_tail(request, ctx, replica),
                  notice=NOTICES.get(flash or notice or ""))
    if flash is not None:
        resp.delete_cookie(NOTICE_COOKIE, path=f"/ui/jobs/{job_id}", httponly=True, samesite="strict")
    return resp


@router.get("/jobs/{job_id}/panels")
def job_panels(job_id: uuid.UUID, request: Request, session: SessionDep, user: User):
    """The parts of the job page that change, for the page's script to swap in."""
    ctx = job_context(request, session, user, job_id)
    return HTMLResponse(render_fragment("job_panels.html", request=request, **ctx), headers=SECURITY_HEADERS)


@router.get("/jobs/{job_id}/cancel")
def cancel_page(job_id: uuid.UUID, request: Request, session: SessionDep, user: Member):
    """The confirmation without JavaScript (a GET: it changes nothing)."""
    return render(request, "cancel.html", user=user, job=jobs.get_job(session, user.actor.team_id, job_id))


@router.post("/jobs/{job_id}/cancel")
def cancel(job_id: uuid.UUID, request: Request, session: SessionDep, user: Member, form: Form):
    svc = services(request)
    job = jobs.cancel_job(session, svc.lifecycle, job_id, user.actor)
    svc.waker.wake(job.backend)
    return with_notice(job_id, "cancel")


@router.get("/jobs/{job_id}/logs.txt")
def download_logs(job_id: uuid.UUID, request: Request, session: SessionDep, user: User,
                  replica: Annotated[str | None, Query(max_length=64)] = None):
    view = logs.view_of(session, user.actor.team_id, job_id)
    backend = logs.backend_of(services(request).backends, view)
    first = logs.read(backend, view.handle, replica, None, 1000)  # a bad replica is an error page, not a cut file

    def lines() -> Iterator[str]:
        page = first
        while True:
            for ln in page.lines:
                yield f"{ln.timestamp.isoformat()} {ln.replica} {ln.stream}: {ln.message}\n"
            # A read may stop at the backend's byte cap with fewer lines (`more`): the file goes on.
            if not page.lines or (len(page.lines) < 1000 and not page.more):
                return
            page = logs.read(backend, view.handle, replica, page.cursor, 1000)

    name = f"job-{job_id}" + (f"-{replica}" if replica else "") + ".log"
    return StreamingResponse(lines(), media_type="text/plain; charset=utf-8",
                             headers={**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'})
