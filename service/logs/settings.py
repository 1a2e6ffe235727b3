"""What the log endpoints need of the settings: the shared readers' bounds
(fanout.FanoutSettings) and a JSON page's size in bytes; built by service/slices.py.
No defaults here: the one Settings (service/core/config.py) holds and documents them."""
from __future__ import annotations

from dataclasses import dataclass

from service.logs.batches import FanoutSettings


@dataclass(frozen=True)
class LogSettings:
    page_max_bytes: int        # TRAINJOBS_LOGS_PAGE_MAX_BYTES
    fanout: FanoutSettings     # TRAINJOBS_LOGS_*
