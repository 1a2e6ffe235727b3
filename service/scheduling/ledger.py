"""The accounting of one pass: who uses what, what is kept for whom, what is free.

A team's nominal quota minus what it lends is *kept*: free or not, no other team may take it.
A job that must not be overtaken has what is free for it *reserved*, held like use by its team.
So the capacity committed to a team is max(its use + its reservations, what it keeps), and a job
fits when the growth of its team's commitment fits in what is not committed. Capacity is never
exceeded: the sum of commitments, which bounds the sum of uses, stays under it. One exception,
the guarantee: a job that keeps its team inside its nominal quota may take what is reserved for
other teams' jobs (the protection against being overtaken yields to the nominal quota)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from service.scheduling.model import DEFAULT_SHARE, SLOT, Resources, Running, Share, quota_part


class Ledger:
    def __init__(self, capacity: Resources, shares: Mapping[str, Share], running: Iterable[Running]):
        self.capacity = dict(capacity)
        self.shares = shares
        self.use: dict[str, dict[str, int]] = {}
        self.kept: dict[str, dict[str, int]] = {}
        self.held: dict[str, dict[str, int]] = {}           # use + reservations
        self.committed: dict[str, int] = dict.fromkeys(self.capacity, 0)
        self.by_reservations: dict[str, dict[str, int]] = {}  # team -> what its reservations add to committed
        self.kept_total: dict[str, int] = {}
        self.jobs: dict[str, int] = {}                        # jobs each team runs (or was admitted)
        # What running jobs are being stopped for, per team (their capacity comes once they have
        # stopped): it counts against the team's nominal quota meanwhile.
        self.promised: dict[str, dict[str, int]] = {}
        for team in shares:
            self._team(team)
        for job in running:
            self.add(job.team, job.demand)

    def share(self, team: str) -> Share:
        return self.shares.get(team, DEFAULT_SHARE)

    def _team(self, team: str) -> dict[str, int]:
        use = self.use.get(team)
        if use is None:
            use = self.use[team] = {}
            self.held[team] = {}
            s = self.share(team)
            kept = {r: n - min(s.lending_limit.get(r, n), n) for r, n in s.nominal.items() if n > 0}
            self.kept[team] = kept
            for r, k in kept.items():
                self.committed[r] = self.committed.get(r, 0) + k
                self.kept_total[r] = self.kept_total.get(r, 0) + k
        return use

    def growth(self, team: str, demand: Resources) -> dict[str, int]:
        """How much more capacity the team's commitment takes if it starts `demand`."""
        self._team(team)
        held, kept = self.held[team], self.kept[team]
        out = {}
        for r, d in demand.items():
            if d:
                h, k = held.get(r, 0), kept.get(r, 0)
                out[r] = max(h + d, k) - max(h, k)
        return out

    def available(self, r: str, team: str | None = None) -> int:
        """Not committed. For `team` (a job that keeps it inside its nominal quota), what other
        teams' reservations hold counts as available too."""
        free = self.capacity.get(r, 0) - self.committed.get(r, 0)
        if team is not None:
            free += sum(v.get(r, 0) for t, v in self.by_reservations.items() if t != team)
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
        s, use = self.share(team), self._team(team)
        out = {}
        for r, d in demand.items():
            limit = s.borrowing_limit.get(r)
            if d and limit is not None and use.get(r, 0) + d > s.nominal.get(r, 0) + limit:
                out[r] = s.nominal.get(r, 0) + limit
        return out

    def within_nominal(self, team: str, demand: Resources) -> bool:
        """Would the team stay inside its nominal quota with `demand` started? What it holds
        counts: its use and what is reserved for its jobs (a job jobs were preempted for, which has
        not started yet), so a team takes back its quota once, not once a pass."""
        s = self.share(team)
        self._team(team)
        held, promised = self.held[team], self.promised.get(team, {})
        asked = quota_part(demand)
        # A job that asks for nothing a quota governs (only a launch slot, or nothing arbitrated)
        # has no guarantee to invoke: it is never "inside" a nominal quota.
        return bool(asked) and all(held.get(r, 0) + promised.get(r, 0) + d <= s.nominal.get(r, 0)
                                   for r, d in asked.items())

    def promise(self, team: str, demand: Resources) -> None:
        """Running jobs are being stopped for a job of `team` that needs `demand`."""
        mine = self.promised.setdefault(team, {})
        for r, d in demand.items():
            if d:
                mine[r] = mine.get(r, 0) + d

    def borrows(self, team: str) -> bool:
        nominal = self.share(team).nominal
        return any(u > nominal.get(r, 0) for r, u in quota_part(self._team(team)).items())

    def add(self, team: str, demand: Resources) -> None:
        self._hold(team, demand, 1)
        self.jobs[team] = self.jobs.get(team, 0) + 1
        use = self.use[team]
        for r, d in demand.items():
            if d:
                use[r] = use.get(r, 0) + d

    def remove(self, team: str, demand: Resources) -> None:
        self._hold(team, demand, -1)
        self.jobs[team] = self.jobs.get(team, 0) - 1
        use = self.use[team]
        for r, d in demand.items():
            if d:
                use[r] = use.get(r, 0) - d

    def _hold(self, team: str, demand: Resources, sign: int) -> dict[str, int]:
        """Changes what the team holds by sign * demand; returns how much committed grew."""
        self._team(team)
        held, kept = self.held[team], self.kept[team]
        grew = {}
        for r, d in demand.items():
            if d:
                h, k = held.get(r, 0), kept.get(r, 0)
                g = max(h + sign * d, k) - max(h, k)
                self.committed[r] = self.committed.get(r, 0) + g
                held[r] = h + sign * d
                grew[r] = g
        return grew

    def reserve(self, team: str, demand: Resources) -> None:
        """Keep what is free now (up to what the job still needs) for a job that must not be
        overtaken: free capacity then accrues to it as running jobs end. Its team's own unused
        kept quota is held for it too, so the team's later jobs do not take it either."""
        self._team(team)
        held, kept = self.held[team], self.kept[team]
        extra = {}
        for r, g in self.growth(team, demand).items():
            n = max(0, min(g, self.available(r)))
            if n:
                extra[r] = n + max(0, kept.get(r, 0) - held.get(r, 0))
        mine = self.by_reservations.setdefault(team, {})
        for r, g in self._hold(team, extra, 1).items():
            mine[r] = mine.get(r, 0) + g

    def fair_key(self, team: str) -> tuple[float, float, float]:
        """(borrowed share, whole share, jobs), each the largest over the resources and divided by
        the team's weight: the team with the smallest goes first. A team inside its nominal quota
        borrows nothing (0); between those, the smaller dominant share of use goes first (launch
        slots are a resource here: with no capacity set they are the only one, so the team running
        fewer jobs goes first); then the team running fewer jobs."""
        s, use = self.share(team), self._team(team)
        borrowed = whole = 0.0
        for r, u in use.items():
            c = self.capacity.get(r, 0)
            if c > 0 and u > 0:
                if r != SLOT:       # no quota names a slot: holding one borrows nothing
                    borrowed = max(borrowed, max(0, u - s.nominal.get(r, 0)) / c)
                whole = max(whole, u / c)
        w = s.weight if s.weight > 0 else 1e-9
        return borrowed / w, whole / w, self.jobs.get(team, 0) / w

    def could_ever_fit(self, team: str, demand: Resources) -> bool:
        """Fits once every job has ended: no more than the capacity others do not keep."""
        self._team(team)
        kept = self.kept[team]
        for r, d in demand.items():
            if d and d > self.capacity.get(r, 0) - (self.kept_total.get(r, 0) - kept.get(r, 0)):
                return False
        return True


def borrowed_jobs(running: Iterable[Running], shares: Mapping[str, Share]) -> set:
    """The running jobs outside their team's nominal quota: a team's jobs fill its nominal quota
    highest priority first, then oldest first; what does not fit is borrowed, and only a
    borrowed job may be preempted for another team's sake."""
    by_team: dict[str, list[Running]] = {}
    for job in running:
        by_team.setdefault(job.team, []).append(job)
    out = set()
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
