"""Early stopping by the median rule (as Vertex AI's and Vizier's "median automated stopping"):
a running trial whose best objective up to its latest epoch e is worse than the median of
the other trials' best values up to epoch e (among trials that have reached e) is stopped.
Off unless the sweep asks for it; only trials at epoch `min_epochs` or later are judged, and
only against at least `min_trials` others. Pure: the launcher reads the epochs and acts."""
from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass

Curve = list[tuple[int, float]]     # (epoch, objective value), by epoch


@dataclass(frozen=True)
class Verdict:
    job_id: uuid.UUID
    reason: str


def _best_upto(curve: Curve, epoch: int, goal: str) -> float | None:
    values = [v for e, v in curve if e <= epoch]
    if not values:
        return None
    return max(values) if goal == "maximize" else min(values)


def laggards(curves: dict[uuid.UUID, Curve], running: set[uuid.UUID], *, metric: str, goal: str, min_epochs: int,
             min_trials: int) -> list[Verdict]:
    out = []
    for job_id in sorted(running):
        curve = curves.get(job_id) or []
        if not curve or curve[-1][0] < min_epochs:
            continue
        epoch = curve[-1][0]
        mine = _best_upto(curve, epoch, goal)
        bests = [_best_upto(c, epoch, goal) for other, c in curves.items()
                 if other != job_id and c and c[-1][0] >= epoch]
        others = [v for v in bests if v is not None]
        if mine is None or len(others) < min_trials:
            continue
        median = statistics.median(others)
        if (mine < median) if goal == "maximize" else (mine > median):
            out.append(Verdict(job_id, f"stopped early: best {metric} {mine:.6g} by epoch {epoch} is "
                                       f"{'below' if goal == 'maximize' else 'above'} the median {median:.6g} "
                                       f"of {len(others)} other trials at that epoch"))
    return out
