"""The accounting of one pass: who uses what, what is kept for whom, what is free.

A team's nominal quota minus what it lends is *kept*: free or not, no other team may take it.
A job that must not be overtaken has what is free for it *reserved*, held like use by its team.
So the capacity committed to a team is max(its use + its reservations, what it keeps), and a job
fits when the growth of its team's commitment fits in what is not committed. Capacity is never
exceeded: the sum of commitments, which bounds the sum of uses, stays under it. One exception,
the guarantee: a job that keeps its team inside its nominal quota may take what is reserved for
other teams' jobs (the protection against being overtaken yields to the nominal quota).

Every method that changes the accounting bumps `version`: a memo of what a pass learned (a kind
of job that cannot start, a team's fair key) is keyed on it, so it is dropped by any change,
including one made by a branch added later."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from service.scheduling.model import DEFAULT_SHARE, SLOT, Id, Resources, Running, Share, quota_part


@dataclass
class TeamBook:
    """One team's accounts in a pass."""
    share: Share
    kept: dict[str, int]                                    # nominal quota it does not lend
    use: dict[str, int] = field(default_factory=dict)      # what its running (and admitted) jobs hold
    held: dict[str, int] = field(default_factory=dict)     # use + reservations
    reserved: dict[str, int] = field(default_factory=dict)  # what its reservations add to committed
    # What running jobs are being stopped for (their capacity comes once they have stopped): it
    # counts against the team's nominal quota meanwhile.
    promised: dict[str, int] = field(default_factory=dict)
    jobs: int = 0                                           # jobs it runs (or was admitted)


class Ledger:
    def __init__(self, capacity: Resources, shares: Mapping[str, Share], running: Iterable[Running],
                 usage: Mapping[str, float] | None = None):
        self.capacity = dict(capacity)
        self.shares = shares
        # Each team's part of every team's decayed use (service/usage: billing units over every
        # backend, halved every half-life): fair share's memory. None or all zero: no memory.
        # (A figure that is not a finite positive number counts as none: it could not be ordered.)
        counted = {t: u for t, u in (usage or {}).items() if 0 < u < math.inf}
        total = sum(counted.values())
        self.past = {t: u / total for t, u in counted.items()} if 0 < total < math.inf else {}
        self.teams: dict[str, TeamBook] = {}
        self.committed: dict[str, int] = dict.fromkeys(self.capacity, 0)
        self.kept_total: dict[str, int] = {}
        self.version = 0                   # bumped by every change (see the module's docstring)
        for team in shares:
            self.book(team)
        for job in running:
            self.add(job.team, job.demand)

    def share(self, team: str) -> Share:
        return self.shares.get(team, DEFAULT_SHARE)

    def book(self, team: str) -> TeamBook:
        """The team's accounts (opened, with what it keeps, the first time it is named)."""
        found = self.teams.get(team)
        if found is None:
            s = self.share(team)
            found = self.teams[team] = TeamBook(s, kept_of(s))
            for r, k in found.kept.items():
                self.committed[r] = self.committed.get(r, 0) + k
                self.kept_total[r] = self.kept_total.get(r, 0) + k
            # No version bump: after __init__ only a team outside `shares` is opened, and it
            # keeps nothing, so opening it changes no figure.
        return found

    def use_of(self, team: str) -> Mapping[str, int]:
        found = self.teams.get(team)
        return found.use if found is not None else {}

    def growth(self, team: str, demand: Resources) -> dict[str, int]:
        """How much more capacity the team's commitment takes if it starts `demand`."""
        book = self.book(team)
        out = {}
        for r, d in demand.items():
            if d:
                h, k = book.held.get(r, 0), book.kept.get(r, 0)
                out[r] = max(h + d, k) - max(h, k)
        return out

    def available(self, r: str, team: str | None = None) -> int:
        """Not committed. For `team` (a job that keeps it inside its nominal quota), what other
        teams' reservations hold counts as available too."""
        free = self.capacity.get(r, 0) - self.committed.get(r, 0)
        if team is not None:
            free += sum(b.reserved.get(r, 0) for t, b in self.teams.items() if t != team)
        return free

    def _available_to(self, team: str, demand: Resources):
        inside = self.within_nominal(team, demand)
        return lambda r: self.available(r, team if inside else None)

    def fits(self, team: str, demand: Resources) -> bool:
        available = self._available_to(team, demand)
        return all(g <= available(r) for r, g in self.growth(team, demand).items())

    def short(self, team: str, demand: Resources) -> dict[str, int]:
        """What is missing for `demand` to fit now, per resource."""
        available = self._available_to(team, demand)
        return {r: g - available(r) for r, g in self.growth(team, demand).items() if g > available(r)}

    def over_borrowing_limit(self, team: str, demand: Resources) -> dict[str, int]:
        """The resources where starting `demand` would take the team past nominal + borrowing limit."""
        book = self.book(team)
        return over_borrowing_limit(book.share, demand, book.use)

    def within_nominal(self, team: str, demand: Resources) -> bool:
        """Would the team stay inside its nominal quota with `demand` started? What it holds
        counts: its use and what is reserved for its jobs (a job jobs were preempted for, which has
        not started yet), so a team takes back its quota once, not once a pass."""
        book = self.book(team)
        asked = quota_part(demand)
        # A job that asks for nothing a quota governs (only a launch slot, or nothing arbitrated)
        # has no guarantee to invoke: it is never "inside" a nominal quota.
        return bool(asked) and all(book.held.get(r, 0) + book.promised.get(r, 0) + d <= book.share.nominal.get(r, 0)
                                   for r, d in asked.items())

    def promise(self, team: str, demand: Resources) -> None:
        """Running jobs are being stopped for a job of `team` that needs `demand`."""
        _plus(self.book(team).promised, demand, 1)
        self.version += 1

    def borrows(self, team: str) -> bool:
        book = self.book(team)
        return any(u > book.share.nominal.get(r, 0) for r, u in quota_part(book.use).items())

    def add(self, team: str, demand: Resources) -> None:
        self._run(team, demand, 1)

    def remove(self, team: str, demand: Resources) -> None:
        self._run(team, demand, -1)

    def _run(self, team: str, demand: Resources, sign: int) -> None:
        self._hold(team, demand, sign)
        book = self.teams[team]
        book.jobs += sign
        _plus(book.use, demand, sign)
        self.version += 1                  # the jobs counted change the fair key, whatever the demand

    def _hold(self, team: str, demand: Resources, sign: int) -> dict[str, int]:
        """Changes what the team holds by sign * demand; returns how much committed grew."""
        book = self.book(team)
        held, kept = book.held, book.kept
        grew = {}
        for r, d in demand.items():
            if d:
                h, k = held.get(r, 0), kept.get(r, 0)
                g = max(h + sign * d, k) - max(h, k)
                self.committed[r] = self.committed.get(r, 0) + g
                held[r] = h + sign * d
                grew[r] = g
        if grew:                           # holding nothing more (a reservation of nothing free) changes nothing
            self.version += 1
        return grew

    def reserve(self, team: str, demand: Resources) -> None:
        """Keep what is free now (up to what the job still needs) for a job that must not be
        overtaken: free capacity then accrues to it as running jobs end. Its team's own unused
        kept quota is held for it too, so the team's later jobs do not take it either."""
        book = self.book(team)
        extra = {}
        for r, g in self.growth(team, demand).items():
            n = max(0, min(g, self.available(r)))
            if n:
                extra[r] = n + max(0, book.kept.get(r, 0) - book.held.get(r, 0))
        _plus(book.reserved, self._hold(team, extra, 1), 1)

    def fair_key(self, team: str) -> tuple[float, float, float]:
        """(borrowed share + past, whole share + past, jobs), divided by the team's weight: the team
        with the smallest goes first (docs/queue.md, "The usage ledger"). Borrowed and whole are
        each the largest over the resources; `past` is the team's part of every team's decayed use
        (0 with no history, so the key is what the team holds now). A team inside its nominal quota
        borrows nothing (0); between those, the smaller dominant share of use goes first (launch
        slots are a resource here: with no capacity set they are the only one, so the team running
        fewer jobs goes first); then the team running fewer jobs. A team that used much lately
        yields to one that used little, on every backend, until what the other holds now makes up
        the difference."""
        book = self.book(team)
        s = book.share
        borrowed = whole = 0.0
        for r, u in book.use.items():
            c = self.capacity.get(r, 0)
            if c > 0 and u > 0:
                if r != SLOT:       # no quota names a slot: holding one borrows nothing
                    borrowed = max(borrowed, max(0, u - s.nominal.get(r, 0)) / c)
                whole = max(whole, u / c)
        w = s.weight if s.weight > 0 else 1e-9
        past = self.past.get(team, 0.0)
        return (borrowed + past) / w, (whole + past) / w, book.jobs / w

    def could_ever_fit(self, team: str, demand: Resources) -> bool:
        """Fits once every job has ended: no more than the capacity others do not keep."""
        kept = self.book(team).kept
        others = {r: k - kept.get(r, 0) for r, k in self.kept_total.items()}
        return not over_capacity(self.capacity, demand, others)


def over_capacity(capacity: Resources, demand: Resources, kept_by_others: Resources | None = None) -> dict[str, int]:
    """The resources where `demand` asks more than the capacity (less what other teams keep), each
    with that most: such a job could never start until the capacity or the quotas change. The
    submit asks it with the whole capacity (it refuses the job: service/capacity/placement.py),
    a pass with what others keep (the job waits, and says why)."""
    kept = kept_by_others or {}
    out = {}
    for r, d in demand.items():
        most = capacity.get(r, 0) - kept.get(r, 0)
        if d and d > most:
            out[r] = most
    return out


def over_borrowing_limit(share: Share, demand: Resources, use: Resources | None = None) -> dict[str, int]:
    """The resources where a team using `use` (none: at the submit) would go past its nominal
    quota + borrowing limit by starting `demand`, each with that most."""
    used = use or {}
    out = {}
    for r, d in demand.items():
        limit = share.borrowing_limit.get(r)
        if d and limit is not None and used.get(r, 0) + d > share.nominal.get(r, 0) + limit:
            out[r] = share.nominal.get(r, 0) + limit
    return out


def kept_of(share: Share) -> dict[str, int]:
    """The part of a team's nominal quota it does not lend: no other team may take it."""
    return {r: n - min(share.lending_limit.get(r, n), n) for r, n in share.nominal.items() if n > 0}


def borrowed_jobs(running: Iterable[Running[Id]], shares: Mapping[str, Share]) -> set[Id]:
    """The running jobs outside their team's nominal quota: a team's jobs fill its nominal quota
    highest priority first, then oldest first; what does not fit is borrowed, and only a
    borrowed job may be preempted for another team's sake."""
    by_team: dict[str, list[Running[Id]]] = {}
    for job in running:
        by_team.setdefault(job.team, []).append(job)
    out: set[Id] = set()
    for team, jobs in by_team.items():
        left = dict(shares.get(team, DEFAULT_SHARE).nominal)
        for job in sorted(jobs, key=lambda j: (-j.priority, j.started_at, str(j.job_id))):
            asked = quota_part(job.demand)
            # A job that asks for nothing a quota governs borrows nothing (its launch slot included).
            if all(d <= left.get(r, 0) for r, d in asked.items()):
                for r, d in asked.items():
                    left[r] -= d
            else:
                out.add(job.job_id)
    return out


def _plus(into: dict[str, int], demand: Resources, sign: int) -> None:
    for r, d in demand.items():
        if d:
            into[r] = into.get(r, 0) + sign * d
