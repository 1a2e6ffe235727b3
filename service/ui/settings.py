"""What the web UI needs of the settings (TRAINJOBS_UI_*), built by service/slices.py.
Its variables: the section below (read as part of the one Settings, service/slices.py), which
states each one's default, limits and meaning once; the slice above is cut from it there."""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, SecretStr

from service.core.section import Section


@dataclass(frozen=True)
class UiSettings:
    session_secret: str | None        # None: a key stored in the database (ui.sessions.SigningKey)
    session_max_age_seconds: int
    secure_cookies: bool | None       # None: when the request came over https
    stream_interval_seconds: float
    stream_max_seconds: float
    heartbeat_seconds: float          # TRAINJOBS_LOGS_HEARTBEAT_SECONDS, as the API's streams
    page_size: int
    diff_max_lines: int
    log_tail_lines: int
    default_backend: str              # the launch form's preselected backend


def refresh_ms(cache_seconds: float) -> int:
    """How often a shown queue reads itself again: as often as it can change (the queue is
    computed at most every TRAINJOBS_QUEUE_CACHE_SECONDS), at least every 5 s, at most every 1 s."""
    return int(min(5.0, max(1.0, cache_seconds)) * 1000)


class UiEnv(Section):
    """The web UI (/ui, docs/ui.md)."""

    ui_session_secret: SecretStr | None = Field(
        None, description="Key that signs the UI's session cookies (32+ characters). Default: one "
                          "generated on first use and kept in the database, shared by every worker")
    ui_session_max_age_seconds: int = Field(43200, ge=60, le=30 * 86400,
                                            description="A UI sign-in lasts this long")
    ui_secure_cookies: bool | None = Field(None, description="Mark UI cookies Secure. Default: when the "
                                           "request came over https")
    ui_stream_interval_seconds: float = Field(1.0, gt=0, le=60, description="How often the UI's live feed "
                                              "reads the jobs changed since its last read (one query for "
                                              "every open page of this process)")
    ui_stream_max_seconds: float = Field(30.0, gt=0, le=3600, description="A UI event stream ends after "
                                         "this long and the browser reconnects where it left off (so open "
                                         "tabs never hold a stopping server, nor a page the browser failed "
                                         "to close, one of its six connections to the host for longer)")
    ui_page_size: int = Field(50, ge=1, le=200, description="Jobs per page of the UI's list")
    ui_diff_max_lines: int = Field(5000, ge=10, le=100_000, description="Template versions longer than this "
                                   "(as indented JSON) are not diffed on a page (the diff's cost grows faster "
                                   "than the length)")
    ui_log_tail_lines: int = Field(200, ge=1, le=5000, description="Log lines a job page shows before "
                                   "JavaScript follows the rest")
