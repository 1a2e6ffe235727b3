"""The Slurm clients (sbatch, squeue, scancel, sacct -c, sinfo) as the backend calls them: a fixed
environment, a timeout, and failures sorted into "try again later" and "refused".

Counts every call and its time, so bench/slurm.py can say what a pass costs."""
from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass, field

from service.backends.slurm.config import SlurmConfig
from service.backends.slurm.poller import ENDED_BADLY
from service.lifecycle.protocol import PermanentBackendError, TransientBackendError

log = logging.getLogger("trainjobs.backends.slurm")

# sbatch's words for a cluster that is there but cannot answer now: worth another pass.
TRANSIENT_MARKS = ("unable to contact slurm controller", "socket timed out", "temporarily unavailable",
                   "try again", "connection refused", "communication connection failure",
                   "slurm_persist_conn", "zero bytes were transmitted", "resource temporarily unavailable",
                   "controller is busy", "slurmctld daemon is busy", "munge")


@dataclass
class CallStats:
    calls: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, tool: str, seconds: float) -> None:
        self.calls[tool] = self.calls.get(tool, 0) + 1
        self.seconds[tool] = self.seconds.get(tool, 0.0) + seconds


class SlurmCli:
    def __init__(self, cfg: SlurmConfig):
        self.cfg = cfg
        self.stats = CallStats()

    def run(self, tool: str, args: list[str], *, what: str) -> str:
        argv = [tool, *args]
        t0 = time.perf_counter()
        try:
            out = subprocess.run(argv, env=self.cfg.client_env, capture_output=True, text=True,
                                 timeout=self.cfg.command_timeout, stdin=subprocess.DEVNULL,
                                 check=False)
        except subprocess.TimeoutExpired as e:
            raise TransientBackendError(f"{what}: {tool} did not answer within "
                                        f"{self.cfg.command_timeout:g} s (TRAINJOBS_SLURM_COMMAND_TIMEOUT_SECONDS)") from e
        except OSError as e:
            raise TransientBackendError(f"{what}: cannot run {tool}: {e}", nothing_launched=True) from e
        finally:
            self.stats.add(tool, time.perf_counter() - t0)
        if out.returncode != 0:
            message = (out.stderr or out.stdout).strip()[:2000] or f"{tool} exited with {out.returncode}"
            if any(mark in message.lower() for mark in TRANSIENT_MARKS):
                raise TransientBackendError(f"{what}: {message}")
            raise PermanentBackendError(f"{what}: {message}", code=out.returncode)
        return out.stdout

    # -- the calls the backend makes -------------------------------------------------------
    def sbatch(self, argv: list[str]) -> str:
        """The new job's id (of its first component: the het job's id)."""
        try:
            out = self.run("sbatch", argv, what="submitting the Slurm job").strip()
        except PermanentBackendError as e:
            raise refusal(e) from e
        job_id = out.split(";", 1)[0].strip()   # --parsable: "<id>[;cluster]"
        if not job_id.isdigit():
            raise refusal(PermanentBackendError(f"sbatch answered {out!r}, not a job id"))
        return job_id

    def squeue_all(self) -> dict:
        """Every job slurmctld still knows (running, pending, and ended within MinJobAge).

        Only a listing Slurm vouches for: with the controller unreachable, squeue --json
        exits 0 with `errors` and an empty `jobs`, which must never read as "every job gone"."""
        out = self.run("squeue", ["--json", "--states=all"], what="listing Slurm jobs")
        try:
            data = json.loads(out)
        except ValueError as e:
            raise TransientBackendError(f"squeue --json printed no JSON: {e}") from e
        return trusted_listing(data)

    def jobcomp(self, slurm_job_id: str, name: str) -> dict | None:
        """How the cluster's job-completion record (JobCompType=jobcomp/filetxt, read by
        `sacct -c` from the service host) says job `slurm_job_id` ended: {"state",
        "exit_code"}, or None when there is no such record (no jobcomp file, not readable
        here, or not written yet). Only a record with the job's name counts: job ids start
        again after a controller loses its state. sacct proper needs slurmdbd (optional)."""
        try:
            out = self.run("sacct", ["-c", "-n", "-P", "-j", slurm_job_id, "-o", "JobID,JobName,State,ExitCode"],
                           what=f"reading the job-completion record of Slurm job {slurm_job_id}")
        except (PermanentBackendError, TransientBackendError) as e:
            # No sacct, no jobcomp file here, or it did not answer: the run folder's exit
            # records are the next witness (the caller's).
            log.info("no job-completion record of Slurm job %s: %s", slurm_job_id, e)
            return None
        return parse_jobcomp(out, slurm_job_id, name)

    def partitions(self) -> list[str]:
        """The cluster's partitions: the one call that also proves the controller answers."""
        out = self.run("sinfo", ["-h", "-o", "%R"], what="asking the Slurm controller for its partitions")
        return sorted({line.strip() for line in out.splitlines() if line.strip()})

    def find_by_name(self, name: str, uid: int) -> list[str]:
        """Het job ids (leaders) of user `uid`'s jobs named `name`, whatever their state."""
        # An unreachable controller is transient (run() sorts it so); anything else squeue
        # refuses (a broken SLURM_CONF, an unknown user) stays permanent: a job cannot be
        # submitted safely without this lookup, so waiting for ever would hide the fault.
        try:
            out = self.run("squeue", ["-h", "--states=all", f"--name={name}", f"--user={uid}", "-o", "%i"],
                           what="looking the job up by its name")
        except TransientBackendError as e:
            raise TransientBackendError(str(e), nothing_launched=True) from e
        except PermanentBackendError as e:
            raise refusal(e) from e
        # A het job's components print as <leader>+<offset>.
        ids = {line.strip().split("+", 1)[0] for line in out.splitlines()}
        return sorted((i for i in ids if i.isdigit()), key=int)

    def signal(self, slurm_job_id: str, signal: str, *, full: bool = False) -> None:
        """`scancel --signal=SIG`: to the job's steps (every task), or with `full` to the batch
        script too. A job already ended is no error (the poll reports how it ended)."""
        assert signal in ("TERM", "KILL"), signal   # fixed words only: nothing of a job's reaches argv
        args = [f"--signal={signal}", *(["--full"] if full else []), slurm_job_id]
        try:
            self.run("scancel", args, what=f"sending SIG{signal} to Slurm job {slurm_job_id}")
        except PermanentBackendError as e:
            log.info("scancel --signal=%s %s refused: %s", signal, slurm_job_id, e)

    def scancel(self, slurm_job_id: str) -> None:
        try:
            self.run("scancel", [slurm_job_id], what=f"cancelling Slurm job {slurm_job_id}")
        except PermanentBackendError as e:
            # Already ended (or gone): the poll reports how it ended.
            log.info("scancel %s refused: %s", slurm_job_id, e)


def trusted_listing(data: object) -> dict:
    """`data` when it is a listing to judge jobs by, else a TransientBackendError naming
    what is wrong with it (Slurm's own `errors`, or no `jobs` list)."""
    if not isinstance(data, dict):
        raise TransientBackendError("squeue --json printed no listing")
    errors = data.get("errors") or []
    if errors:
        first = errors[0] if isinstance(errors[0], dict) else {}
        said = ", ".join(str(first[k]) for k in ("source", "description", "error") if first.get(k))
        raise TransientBackendError(f"listing Slurm jobs: squeue reported {len(errors)} error(s) ({said}); "
                                    "the Slurm controller may be down or restarting")
    if not isinstance(data.get("jobs"), list):
        raise TransientBackendError("listing Slurm jobs: squeue --json printed no jobs list")
    return data


def parse_jobcomp(out: str, slurm_job_id: str, name: str) -> dict | None:
    """The record of `slurm_job_id` (a het job's leader) named `name` in `sacct -c -P` lines
    (JobID|JobName|State|ExitCode); should several match, the worst counts, as in squeue
    (poller.parse)."""
    states: list[tuple[str, str]] = []
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or parts[1] != name:
            continue
        job, state, code = parts[0], parts[2].split()[0] if parts[2].strip() else "", parts[3]
        if job == slurm_job_id or job.split("+", 1)[0] == slurm_job_id:
            states.append((state, code))
    if not states:
        return None
    state, code = next(((s, c) for bad in ENDED_BADLY for s, c in states if s == bad), states[-1])
    exit_code = code.split(":", 1)[0]
    return {"state": state, "exit_code": int(exit_code) if exit_code.isdigit() else None}


def refusal(e: PermanentBackendError) -> PermanentBackendError:
    """A Slurm client's refusal (sbatch's, a lookup's) with the fields every Slurm error
    carries, and the setting to change where the refusal is about one (a node smaller than
    the CPUs asked)."""
    said = [line.split("error:", 1)[-1].strip() for line in e.message.splitlines() if line.strip()]
    message = e.message
    if "cpu count per node can not be satisfied" in message.lower():
        message += (". Each task asks for its machine_type's vCPUs (n1-standard-4: 4) unless "
                    "TRAINJOBS_SLURM_CPUS_PER_TASK sets how many; set it to at most the CPUs of your nodes")
    return PermanentBackendError(message, code=e.code,
                                 details={"slurm_state": None, "slurm_reason": said[-1] if said else None,
                                          "slurm_job_id": None})
