"""A small world in passes, for the property tests and bench/fairness.py: jobs arrive, run for
a number of passes and end; a preempted job stops at the next pass (the grace period) and waits
again; the scheduler decides every pass. It records what a property needs to check."""
from __future__ import annotations

from dataclasses import dataclass, field

from service.scheduling.ledger import borrowed_jobs
from service.scheduling.model import Policy, Running, Share, Waiting
from service.scheduling.scheduler import schedule


@dataclass
class Job:
    job_id: str
    team: str
    arrival: int
    demand: dict
    duration: int
    priority: int = 0
    may_preempt: bool = False


@dataclass
class World:
    capacity: dict
    shares: dict[str, Share]
    jobs: list[Job]
    policy: Policy = field(default_factory=Policy)
    started: dict[str, list[int]] = field(default_factory=dict)  # job -> the passes it started at
    first_start: dict[str, int] = field(default_factory=dict)
    finished: set = field(default_factory=set)
    preemptions: list[tuple[int, str, str, str]] = field(default_factory=list)   # (pass, victim, for job, kind)
    violations: list[str] = field(default_factory=list)
    max_preemptions: int = 3
    preempted_count: dict[str, int] = field(default_factory=dict)
    guaranteed: dict[int, set] = field(default_factory=dict)     # pass -> teams that started a job inside their nominal quota
    max_use: dict = field(default_factory=dict)

    def run(self, passes: int) -> None:
        by_id = {j.job_id: j for j in self.jobs}
        waiting: dict[str, float] = {}            # job -> queued at
        running: dict[str, Running] = {}
        left: dict[str, int] = {}                 # passes of work left
        nominated: set = set()
        for now in range(passes):
            for job in self.jobs:
                if job.arrival == now:
                    waiting[job.job_id] = now
                    left[job.job_id] = job.duration
            for job_id, r in list(running.items()):
                if r.stopping:                    # the grace period is one pass: it has stopped
                    del running[job_id]
                    waiting[job_id] = by_id[job_id].arrival
                elif left[job_id] == 0:
                    del running[job_id]
                    self.finished.add(job_id)
            queue = [Waiting(i, by_id[i].team, by_id[i].priority, by_id[i].demand, t, by_id[i].may_preempt,
                             nominated=i in nominated) for i, t in waiting.items()]
            d = schedule(self.capacity, self.shares, list(running.values()), queue, now, self.policy)
            self._check(now, d, running, queue)
            use: dict = {}
            for r in running.values():
                for k, n in r.demand.items():
                    use.setdefault(r.team, {})[k] = use.get(r.team, {}).get(k, 0) + n
            for a in d.admit:
                job = by_id[a.job_id]
                u, nominal = use.setdefault(job.team, {}), self.shares.get(job.team, Share()).nominal
                for k, n in job.demand.items():
                    u[k] = u.get(k, 0) + n
                if all(u.get(k, 0) <= nominal.get(k, 0) for k, n in job.demand.items() if n):
                    self.guaranteed.setdefault(now, set()).add(job.team)
                del waiting[a.job_id]
                nominated.discard(a.job_id)
                running[a.job_id] = Running(a.job_id, job.team, job.priority, job.demand, now,
                                            preemptible=self.preempted_count.get(a.job_id, 0) < self.max_preemptions)
                self.started.setdefault(a.job_id, []).append(now)
                self.first_start.setdefault(a.job_id, now)
            for p in d.preempt:
                v = running[p.job_id]
                running[p.job_id] = Running(v.job_id, v.team, v.priority, v.demand, v.started_at, stopping=True,
                                            stopping_for=p.for_job)
                nominated.add(p.for_job)
                self.preempted_count[p.job_id] = self.preempted_count.get(p.job_id, 0) + 1
                self.preemptions.append((now, p.job_id, p.for_job, p.kind.value))
            for job_id, r in running.items():
                if not r.stopping and r.started_at < now + 1:
                    left[job_id] = max(0, left[job_id] - 1) if r.started_at < now else left[job_id]
            if not waiting and not running and all(j.arrival <= now for j in self.jobs):
                return

    def _check(self, now, d, running, queue) -> None:
        demand = {w.job_id: w.demand for w in queue}
        use: dict = {}
        for r in running.values():
            for k, n in r.demand.items():
                use[k] = use.get(k, 0) + n
        for a in d.admit:
            for k, n in demand[a.job_id].items():
                use[k] = use.get(k, 0) + n
        for k, n in use.items():
            self.max_use[k] = max(self.max_use.get(k, 0), n)
            if n > self.capacity.get(k, 0):
                self.violations.append(f"pass {now}: {n} {k} in use, capacity {self.capacity.get(k, 0)}")
        borrowed = borrowed_jobs(running.values(), self.shares)
        teams = {w.job_id: w.team for w in queue}
        for p in d.preempt:
            if p.for_job not in demand:
                self.violations.append(f"pass {now}: {p.job_id} preempted for {p.for_job}, which does not wait")
            elif running[p.job_id].team != teams[p.for_job] and p.job_id not in borrowed:
                self.violations.append(f"pass {now}: {p.job_id} preempted inside its team's nominal quota")
