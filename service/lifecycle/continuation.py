"""Where a preempted job's next attempt may go on (issue 52.5): only where its checkpoints are.

A job that accepts several backends was placed on one; its output (the checkpoints the trainer
resumes from) lives where that backend keeps outputs. If the operator declared a folder that
backend shares with others it accepts (each backend's `Capabilities.shared_output`, the same
folder), the next attempt accepts those again, in the job's own order, and the pass across
backends places it as a new job (it keeps its first attempt's age in the queue). Anywhere else
it stays on its backend. Pure: the backends' declarations come in as data, no backend is named."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OutputPlace:
    """A backend's place for job outputs, as its capabilities declare it."""

    root: str | None = None       # in words: "gs://bucket/out", a folder
    shared: str | None = None     # the operator's shared folder, if it keeps outputs there


@dataclass(frozen=True)
class Continuation:
    """The next attempt's backends: `accepts` (Job.accepts' shape; None: only `backend`),
    `backend` and `demand` (the most preferred's until it is placed), `wish`, and `words` (why)."""

    backend: str
    demand: Any
    accepts: list[dict] | None
    wish: dict | None
    words: str


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def plan(placed: str, demand: Any, accepts: Sequence[Mapping[str, Any]] | None, wish: Mapping[str, Any] | None,
         places: Mapping[str, OutputPlace]) -> Continuation:
    """The next attempt of a job placed on `placed` (with `demand` there) that accepted `accepts`."""
    if not accepts or len(accepts) < 2:
        return Continuation(placed, demand, None, None, "")
    here = places.get(placed) or OutputPlace()
    names = [str(a["backend"]) for a in accepts]
    reach = [a for a in accepts if a["backend"] == placed or
             (here.shared is not None and (places.get(str(a["backend"])) or OutputPlace()).shared == here.shared)]
    others = [n for n in names if n not in {str(a["backend"]) for a in reach}]
    if len(reach) < 2:
        where = here.root or f"{placed}'s own storage"
        return Continuation(placed, demand, None, None,
                            f"stays on {placed}: its checkpoints are in {where}, which {_names(others)} cannot read")
    words = f"continues on {_names([str(a['backend']) for a in reach])}: its checkpoints are in {here.shared}"
    if others:
        words += f", which {_names(others)} cannot read"
    return Continuation(str(reach[0]["backend"]), reach[0].get("demand"), [dict(a) for a in reach],
                        _continued_wish(wish), words)


def _continued_wish(wish: Mapping[str, Any] | None) -> dict | None:
    """The job's preference carries over; its start_by does not: the job started once, and a
    deadline for its first start would make the next attempt wait for one backend."""
    if not wish or wish.get("prefer") in (None, "listed"):
        return None
    return {**wish, "start_by": None}
