"""Which backends a submitted job accepts (issue 52.1, docs/queue.md "Placement across backends"),
and every backend's problem with it at once.

A template may declare `backends`, most preferred first; none: the one the request names (or the
service's default), as before. A request's `backend` narrows a declared list to that one; a
member's `overrides.backends` (where `overridable` lets them) may only narrow it too. The job is
checked against each backend it accepts (enabled, its launch checks, the team's checks, whether
it could ever fit there); one 422 lists every backend's problems, each named by its backend."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from service.capacity.placement import Placed
from service.core.errors import Invalid, Problem
from service.jobspec import CompiledJob
from service.lifecycle.protocol import Backend


@dataclass(frozen=True)
class Accepted:
    """The backends a job accepts, most preferred first, each with what it holds there."""

    placed: tuple[tuple[str, Placed], ...]

    @property
    def first(self) -> tuple[str, Placed]:
        return self.placed[0]

    def accepts(self) -> list[dict[str, Any]] | None:
        """The job row's `accepts` column: None for a job of one backend (as every job before)."""
        if len(self.placed) < 2:
            return None
        return [{"backend": name, "demand": p.demand or None} for name, p in self.placed]


def requested(template_spec: Mapping[str, Any], overrides: Any, backend: str | None, default: str,
              enabled: Mapping[str, Backend], *, admin: bool) -> tuple[list[str], list[Problem]]:
    """The names the job accepts, and the problems with the request's choice (before the compile:
    the 422 lists them with the compiler's)."""
    declared = template_spec.get("backends")
    chosen = declared
    if isinstance(overrides, dict) and "backends" in overrides:
        chosen = overrides["backends"]
    if not isinstance(chosen, list) or not chosen or not all(isinstance(n, str) for n in chosen):
        chosen = declared if isinstance(declared, list) and declared else None   # the compile names a bad value
    problems: list[Problem] = []
    if chosen is not None and declared and not admin:
        wider = [n for n in chosen if n not in declared]
        if wider:
            problems.append(Problem("overrides.backends", f"the template accepts only {', '.join(declared)}; "
                                    f"not {', '.join(wider)}", "name some of the template's backends, most preferred "
                                    "first (a member may narrow the list, not widen it)"))
            chosen = [n for n in chosen if n in declared] or list(declared)
    if chosen is None:
        names = [backend or default]
    elif backend is not None:
        if backend not in chosen:
            problems.append(Problem("backend", f"this job accepts only {', '.join(chosen)}; not {backend}",
                                    f"name one of {', '.join(chosen)}, or leave backend out to let the queue "
                                    "place it"))
        names = [backend]
    else:
        names = list(dict.fromkeys(chosen))
    for name in names:
        if name not in enabled:
            problems.append(Problem("backend" if len(names) == 1 else f"backends.{name}",
                                    f"backend {name!r} is not enabled on this service",
                                    f"use one of: {', '.join(sorted(enabled))} "
                                    "(the service's TRAINJOBS_BACKENDS setting enables others)"))
    return names, problems


def check(names: list[str], enabled: Mapping[str, Backend], compiled: CompiledJob, team: str,
          place: Callable[[str, Backend], Placed]) -> tuple[Accepted | None, list[Problem]]:
    """Each accepted backend's checks of the compiled job, all of them: (what the job holds on each,
    no problem) or (None, every problem, a multi-backend job's named by backend)."""
    problems: list[Problem] = []
    placed: list[tuple[str, Placed]] = []
    several = len(names) > 1
    for name in names:
        backend = enabled.get(name)
        if backend is None:
            continue   # named among the request's problems
        found = backend.check_launchable(compiled) + backend.check_for_team(compiled, team)
        if not found:
            try:
                placed.append((name, place(name, backend)))
            except Invalid as e:
                found = e.problems
        problems += [_named(p, name) for p in found] if several else found
    if problems or len(placed) < len(names):
        return None, problems
    return Accepted(tuple(placed)), []


def _named(problem: Problem, backend: str) -> Problem:
    """A problem of one of the job's backends: its field under backends.<name>, its message naming it."""
    return Problem(f"backends.{backend}" + (f".{problem.field}" if problem.field and problem.field != "backend" else ""),
                   f"{backend}: {problem.message}", problem.fix)
