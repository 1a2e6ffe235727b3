"""A Slurm run folder, on storage the service host and every node share.

    <slurm_work_dir>/<job id>/              the service's (0755)
        job.json                            what the launcher runs: per task its command, env, role
        launcher.py                         the launcher (copied: the nodes need no trainjobs install)
        batch.sh                            the batch script (fixed text: paths only)
        state.json                          the service's record: Slurm job id, an outcome it decided
        slurm.out                           the batch script's own output (Slurm's --output)
        logs/<task>.log                     the task's stdout and stderr (format: local/wrapper.py)
        tasks/<task>.addr|.started|.exit    written by the launcher on the node
        output/                             AIP_MODEL_DIR=output/model/ ... (the job user's)
        work/                               the tasks' working folder, HOME and TMPDIR (the job user's)

When the service is root, the folders it reads (logs/, tasks/) stay root's and every
file in them is created here, empty and owned by the job's user: a task can write its
own files but never swap one for a link to something of the service host's."""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from service.backends.owned_tree import chown_tree, own_folder

TASK_FILES = ("addr", "started", "exit")


@dataclass(frozen=True)
class SlurmRun:
    path: Path

    @classmethod
    def of(cls, work_dir: Path, job_id: uuid.UUID | str) -> SlurmRun:
        return cls(Path(work_dir) / str(job_id))

    @property
    def job_file(self) -> Path:
        return self.path / "job.json"

    @property
    def launcher(self) -> Path:
        return self.path / "launcher.py"

    @property
    def batch_script(self) -> Path:
        return self.path / "batch.sh"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def batch_output(self) -> Path:
        return self.path / "slurm.out"

    @property
    def output(self) -> Path:
        return self.path / "output"

    @property
    def work(self) -> Path:
        return self.path / "work"

    def log(self, task: str) -> Path:
        return self.path / "logs" / f"{task}.log"

    def task_file(self, task: str, kind: str) -> Path:
        return self.path / "tasks" / f"{task}.{kind}"

    def create(self, tasks: list[str], owner: tuple[int, int] | None) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        # The job's group may enter (its tasks read job.json and the launcher); others may not:
        # job.json holds the template's env.
        if owner is not None:
            os.chown(self.path, -1, owner[1])
        os.chmod(self.path, 0o750)
        for d in ("logs", "tasks"):
            (self.path / d).mkdir(exist_ok=True)
            os.chmod(self.path / d, 0o755)
        files = [self.log(t) for t in tasks] + [self.task_file(t, k) for t in tasks for k in TASK_FILES]
        files.append(self.batch_output)
        for f in files:
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            if owner is not None:
                os.fchown(fd, *owner)
            os.close(fd)
        for folder in (self.output, self.work, self.work / "home", self.work / "tmp"):
            own_folder(folder, owner)

    def read_json(self, path: Path) -> dict | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, OSError):
            return None
        with os.fdopen(fd) as f:
            try:
                data = json.loads(f.read(1 << 20) or "null")
            except ValueError:
                return None  # still being written, or not ours
        return data if isinstance(data, dict) else None

    def task_record(self, task: str, kind: str) -> dict | None:
        return self.read_json(self.task_file(task, kind))

    def read_state(self) -> dict | None:
        return self.read_json(self.state_file)

    def write_state(self, state: dict) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, self.state_file)

    def write_private(self, path: Path, text: str, mode: int = 0o640) -> None:
        """A file the tasks read but never write: the service's, readable by the run folder's group."""
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        os.chown(tmp, -1, self.path.stat().st_gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)


def own_tree(top: Path, owner: tuple[int, int] | None) -> None:
    """A retry's shared output folder, handed to the job user: a descriptor walk that never
    follows a link a task put in place of a folder (service.backends.owned_tree)."""
    own_folder(top, owner)
    if owner is not None:
        chown_tree(top, owner[0], gid=owner[1])
        # Its run folder (the service's, 0750) lets the retry's group pass: the first attempt
        # may have run as another user (its team got a user of its own since).
        fd = os.open(top.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchown(fd, -1, owner[1])
        finally:
            os.close(fd)
