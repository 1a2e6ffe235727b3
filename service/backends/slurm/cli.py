"""The Slurm clients (sbatch, squeue, scancel) as the backend calls them: a fixed
environment, a timeout, and failures sorted into "try again later" and "refused".

Counts every call and its time, so bench/slurm.py can say what a pass costs."""
from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass, field

from service.backends.slurm.config import SlurmConfig
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
        out = self.run("sbatch", argv, what="submitting the Slurm job").strip()
        job_id = out.split(";", 1)[0].strip()   # --parsable: "<id>[;cluster]"
        if not job_id.isdigit():
            raise PermanentBackendError(f"sbatch answered {out!r}, not a job id")
        return job_id

    def squeue_all(self) -> dict:
        """Every job slurmctld still knows (running, pending, and ended within MinJobAge)."""
        out = self.run("squeue", ["--json", "--states=all"], what="listing Slurm jobs")
        try:
            return json.loads(out)
        except ValueError as e:
            raise TransientBackendError(f"squeue --json printed no JSON: {e}") from e

    def find_by_name(self, name: str, uid: int) -> list[str]:
        """Het job ids (leaders) of user `uid`'s jobs named `name`, whatever their state."""
        try:
            out = self.run("squeue", ["-h", "--states=all", f"--name={name}", f"--user={uid}", "-o", "%i"],
                           what="looking the job up by its name")
        except PermanentBackendError as e:
            raise TransientBackendError(str(e), nothing_launched=True) from e
        # A het job's components print as <leader>+<offset>.
        ids = {line.strip().split("+", 1)[0] for line in out.splitlines()}
        return sorted((i for i in ids if i.isdigit()), key=int)

    def scancel(self, slurm_job_id: str) -> None:
        try:
            self.run("scancel", [slurm_job_id], what=f"cancelling Slurm job {slurm_job_id}")
        except PermanentBackendError as e:
            # Already ended (or gone): the poll reports how it ended.
            log.info("scancel %s refused: %s", slurm_job_id, e)
