"""Event types, which of them a job change makes, and what a delivery says.

The standard payload follows Standard Webhooks' shape: {"type", "timestamp", "data"}.
It is made once, when the change is written (a snapshot of the job then), and kept in
the delivery row; the Slack form ({"text": ...}) is rendered from it at send time."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal, get_args

from service.lifecycle.sanitize import clean_text
from service.lifecycle.states import JobState

S = JobState
EVENT_TYPES: dict[str, str] = {
    "job.state_changed": "every change of a job's state, its creation (QUEUED) included",
    "job.created": "a job was submitted (QUEUED)",
    "job.running": "a job started running (RUNNING)",
    "job.succeeded": "a job ended SUCCEEDED",
    "job.failed": "a job ended FAILED",
    "job.cancelled": "a job ended CANCELLED",
    "job.expired": "a job ended EXPIRED",
    "job.preempted": "a job was preempted for another one (it ends FAILED with error.cause \"preemption\" and "
                     "a new attempt is queued; sent instead of job.failed)",
}
# The names of EVENT_TYPES as a type: request bodies validate against it (webhooks.schemas).
EventType = Literal["job.state_changed", "job.created", "job.running", "job.succeeded", "job.failed",
                    "job.cancelled", "job.expired", "job.preempted"]
assert set(get_args(EventType)) == set(EVENT_TYPES)  # one list
DEFAULT_EVENT_TYPES: list[EventType] = ["job.succeeded", "job.failed", "job.cancelled", "job.expired"]
TEST_EVENT = "webhook.test"   # POST /v1/webhooks/{id}/test; sent whatever the subscription's types
_BY_STATE = {S.RUNNING: "job.running", S.SUCCEEDED: "job.succeeded", S.FAILED: "job.failed",
             S.CANCELLED: "job.cancelled", S.EXPIRED: "job.expired"}
_EMOJI = {S.SUCCEEDED: ":white_check_mark:", S.FAILED: ":x:", S.CANCELLED: ":no_entry_sign:",
          S.EXPIRED: ":hourglass:", S.RUNNING: ":arrow_forward:", S.QUEUED: ":inbox_tray:"}
SLACK_TEXT_CHARS = 3000       # Slack shows about this much of a message before "show more"


def types_for(from_state: JobState | None, to_state: JobState | None, *, preempted: bool = False) -> list[str]:
    """preempted: the job ended by a preemption (lifecycle/preempted.py), which is not its failure."""
    if to_state is None:
        return []   # progress only
    out = ["job.state_changed"]
    if from_state is None:
        out.append("job.created")
    if preempted:
        out.append("job.preempted")
    elif to_state in _BY_STATE:
        out.append(_BY_STATE[to_state])
    return out


def body_bytes(payload: dict) -> bytes:
    # "replace": a lone surrogate that slipped through must not stop every later delivery.
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace")


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _clip(text: Any, limit: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def job_payload(event_type: str, job, team: str, *, from_state: JobState | None, to_state: JobState,
                reason: str, actor: str, at: datetime, public_url: str | None, max_bytes: int) -> dict:
    """`job`: a row with the Job columns (as committed with this change)."""
    error = job.error if isinstance(job.error, dict) else None
    progress = job.progress if isinstance(job.progress, dict) else None
    data = {
        "job": {
            "id": str(job.id), "display_name": job.display_name, "team": team,
            "template": {"name": job.template_name, "version": job.template_version},
            "backend": job.backend, "state": to_state.value, "labels": job.labels or {},
            "created_by": job.created_by, "created_at": _iso(job.created_at), "started_at": _iso(job.started_at),
            "ended_at": _iso(job.ended_at), "console_url": job.console_url,
            "error": {k: error[k] for k in ("code", "message", "replica", "exit_code", "cause", "for_job", "kind")
                      if k in error}
            if error else None,
            "progress": {k: progress[k] for k in ("epoch", "epochs", "metrics", "phase") if k in progress}
            if progress else None,
            "url": f"{public_url}/v1/jobs/{job.id}" if public_url else None,
            "ui_url": f"{public_url}/ui/jobs/{job.id}" if public_url else None,
        },
        "from_state": from_state.value if from_state else None, "to_state": to_state.value,
        # From a replica's output or Google's answer: made storable and bounded like the event row.
        "reason": clean_text(reason or "", 2000), "actor": clean_text(actor or "", 200),
    }
    placement = getattr(job, "placement", None)
    if placement and isinstance(data["job"], dict):   # a job of several backends, placed: where and why there
        data["job"]["placement"] = placement
    return bounded({"type": event_type, "timestamp": at.isoformat(), "data": data}, max_bytes)


def bounded(payload: dict, max_bytes: int) -> dict:
    """The payload, cut step by step until its body fits in `max_bytes` (`data.truncated`
    says it was). Replica output and labels can make it large; ids and states always stay."""
    if len(body_bytes(payload)) <= max_bytes:
        return payload
    data = json.loads(json.dumps(payload["data"]))
    job = data.get("job", {})
    data["truncated"] = True
    steps = [
        lambda: (job.pop("progress", None), job.__setitem__("labels", {})),
        lambda: (data.__setitem__("reason", _clip(data.get("reason"), 500)),
                 job.get("error") and job["error"].__setitem__("message", _clip(job["error"].get("message"), 500))),
        lambda: (data.__setitem__("reason", _clip(data.get("reason"), 100)), job.pop("error", None),
                 job.pop("console_url", None), job.__setitem__("display_name", _clip(job.get("display_name"), 128))),
    ]
    for step in steps:
        step()
        out = {**payload, "data": data}
        if len(body_bytes(out)) <= max_bytes:
            return out
    keep = {k: job.get(k) for k in ("id", "state", "url")}
    return {**payload, "data": {"job": keep, "from_state": data.get("from_state"),
                                "to_state": data.get("to_state"), "truncated": True}}


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(payload: dict, max_bytes: int | None = None) -> dict:
    """Slack's incoming-webhook form: one message, with a link to the job when the service
    knows its own address (TRAINJOBS_PUBLIC_URL); its body within `max_bytes`."""
    out = _slack(payload)
    while max_bytes is not None and len(body_bytes(out)) > max_bytes and out["text"]:
        out = {"text": _clip(out["text"], len(out["text"]) // 2)}
    return out


def _slack(payload: dict) -> dict:
    data = payload.get("data", {})
    if payload.get("type") == TEST_EVENT:
        return {"text": _clip(f"trainjobs: test message for webhook {data.get('webhook_id')} "
                              f"(sent by {_slack_escape(str(data.get('sent_by')))}): it works.", SLACK_TEXT_CHARS)}
    job = data.get("job", {})
    to = data.get("to_state") or job.get("state") or "?"
    name = _slack_escape(_clip(job.get("display_name") or job.get("id"), 128))
    link = job.get("ui_url") or job.get("url")
    title = f"<{_slack_escape(link).replace('|', '%7C')}|{name}>" if link else f"*{name}*"
    template = job.get("template") or {}
    where = f" ({_slack_escape(str(template.get('name')))} v{template.get('version')}" \
            f", team {_slack_escape(str(job.get('team')))})" if template else ""
    was = f" (was {data['from_state']})" if data.get("from_state") else ""
    state = _state(to)
    emoji = _EMOJI.get(state, ":information_source:") if state is not None else ":information_source:"
    text = f"{emoji} Job {title}{where} is *{to}*{was}"
    if data.get("reason"):
        text += f": {_slack_escape(_clip(data['reason'], 500))}"
    error = job.get("error") or {}
    if to == "FAILED" and error.get("message"):
        text += f"\n> {_slack_escape(_clip(error['message'], 500))}"
    return {"text": _clip(text, SLACK_TEXT_CHARS)}


def _state(value: str) -> JobState | None:
    try:
        return JobState(value)
    except ValueError:
        return None
