"""What the web UI needs of the settings (TRAINJOBS_UI_*), built by service/slices.py.
No defaults here: the one Settings (service/core/config.py) holds and documents them."""
from __future__ import annotations

from dataclasses import dataclass


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
