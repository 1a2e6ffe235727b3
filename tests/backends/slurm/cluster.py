"""A real Slurm cluster in a short temporary folder: munged, slurmctld and two slurmd
nodes (n1 at 127.0.0.11, n2 at 127.0.0.12) from the OS packages (scripts/test.sh
installs them). Everything it starts is a child of this process, in the foreground,
so teardown stops exactly those pids.

Each slurmd runs in its own UTS + mount namespace (Debian's slurmd is built with
MULTIPLE_SLURMD): its hostname is its node name and a bind-mounted hosts file makes
n1/n2 resolve, so the tasks it starts see the node they run on and reach each other by
name. All nodes share this machine's network stack (shared/SLURM.md), which is why the
launcher picks a free port per task rather than a fixed one.

    python -m tests.backends.slurm.cluster      # start one by hand, print SLURM_CONF, Ctrl-C stops it
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.waiting import wait_for

NODES = {"n1": "127.0.0.11", "n2": "127.0.0.12"}
CPUS_PER_NODE = 8   # advertised (SlurmdParameters=config_overrides): the tests ask for 1 per task
MEMORY_MB = 2000
START_TIMEOUT = 30.0
# Partition `grace` is `debug` with a preemption GraceTime (the common setting): a job `urgent`
# preempts there gets SIGTERM and this long to end before SIGKILL.
GRACE_SECONDS = 20
REQUIRED = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "unshare")


PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def missing_tools() -> list[str]:
    return [t for t in REQUIRED if shutil.which(t, path=PATH) is None]


def _free_port_block(n: int) -> int:
    """A base port P with P..P+n-1 all free on 127.0.0.0/8."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65000:
            continue
        ok = True
        for p in range(base, base + n):
            for host in ("127.0.0.1", *NODES.values()):
                with socket.socket() as t:
                    try:
                        t.bind((host, p))
                    except OSError:
                        ok = False
        if ok:
            return base
    raise OSError("no block of free ports")


class SlurmCluster:
    def __init__(self, root: Path | None = None, nodes: dict[str, str] | None = None):
        # Unix socket paths must stay under 108 characters: a short folder of our own.
        self.root = Path(root or tempfile.mkdtemp(prefix="tjs-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.nodes = dict(nodes or NODES)
        self.port = _free_port_block(1 + len(self.nodes))
        self.name = f"tj{self.port}"
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.procs: list[subprocess.Popen] = []
        self._logs: list = []

    # -- configuration ---------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """All a client (sbatch, squeue, scancel) needs."""
        return {"SLURM_CONF": str(self.conf), "PATH": PATH}

    def _write_config(self) -> None:
        r = self.root
        for d in ("munge", "state", "spool", "log", "run", "etc"):
            (r / d).mkdir(exist_ok=True)
        os.chmod(r / "munge", 0o711)  # munged insists on this for its socket's folder
        key = r / "etc" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        hosts = r / "etc" / "hosts"
        hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for n, a in self.nodes.items()))
        os.chmod(hosts, 0o644)
        node_lines = "".join(
            f"NodeName={n} NodeAddr={a} NodeHostname={n} Port={self.port + 1 + i} CPUs={CPUS_PER_NODE} "
            f"RealMemory={MEMORY_MB} State=UNKNOWN\n" for i, (n, a) in enumerate(self.nodes.items()))
        self.conf.write_text(f"""\
ClusterName={self.name}
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={self.port}
SlurmdPort={self.port + 1}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={r}/log/jobcomp
SchedulerParameters=bf_interval=1
MinJobAge=300
KillWait=5
OverTimeLimit=0
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
{node_lines}PartitionName=debug Nodes={",".join(self.nodes)} Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes={",".join(self.nodes)} MaxTime=INFINITE State=UP PriorityTier=2
PartitionName=grace Nodes={",".join(self.nodes)} MaxTime=INFINITE State=UP PriorityTier=1 GraceTime={GRACE_SECONDS}
""")

    # -- daemons ------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.root / "log" / f"{name}.out", "ab")
        self._logs.append(log)
        env = {**self.env, "LANG": "C.UTF-8"}
        argv = [shutil.which(argv[0], path=PATH) or argv[0], *argv[1:]]
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self) -> SlurmCluster:
        self._write_config()
        r = self.root
        self._spawn("munged", ["munged", "-F", "--force", f"--socket={self.munge_socket}",
                               f"--key-file={r}/etc/munge.key", f"--pid-file={r}/run/munged.pid",
                               f"--log-file={r}/log/munged.log", f"--seed-file={r}/run/munged.seed"])
        self._wait(lambda: self.munge_socket.exists(), "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        hosts = r / "etc" / "hosts"
        for n in self.nodes:
            (r / "spool" / n).mkdir(exist_ok=True)
            # Its own hostname and hosts file; the mounts stay inside its namespace.
            script = f'hostname {n} && mount --bind {hosts} /etc/hosts && exec slurmd -D -N {n} -f {self.conf}'
            self._spawn(f"slurmd-{n}", ["unshare", "--uts", "--mount", "--propagation", "slave",
                                        "sh", "-c", script])
        self._wait(self._nodes_idle, "every node to be idle")
        return self

    @contextlib.contextmanager
    def silent_controller(self):
        """The path of a copy of the cluster's configuration whose controller takes every
        connection and never answers (a slurmctld hung): a client's call waits until its own
        timeout, whatever the host's load, and the real controller hears nothing of it."""
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            port = listener.getsockname()[1]
            conf = self.root / "etc" / f"slurm-silent-{port}.conf"
            text = self.conf.read_text()
            assert f"SlurmctldPort={self.port}\n" in text
            conf.write_text(text.replace(f"SlurmctldPort={self.port}\n", f"SlurmctldPort={port}\n"))
            try:
                yield conf
            finally:
                conf.unlink(missing_ok=True)

    def stop_controller(self) -> None:
        """slurmctld stopped (its state saved), as for a restart or a failover: the nodes and
        the jobs' steps go on without it."""
        ctld = next(p for p in self.procs if "slurmctld" in str(p.args[0]) and p.poll() is None)
        os.killpg(ctld.pid, signal.SIGTERM)
        ctld.wait(30)
        self.procs.remove(ctld)

    def start_controller(self) -> None:
        """slurmctld again, from its saved state; returns once it answers."""
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True, text=True,
                                          timeout=30).returncode == 0, "slurmctld to answer again")

    def _nodes_idle(self) -> bool:
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"a Slurm daemon exited ({p.args[0]}): see {self.root}/log\n"
                                   + self.log_tail())
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

    def _wait(self, predicate, what: str, timeout: float = START_TIMEOUT) -> None:
        try:
            wait_for(predicate, what, timeout, 0.1)
        except AssertionError as e:
            raise RuntimeError(f"{e}\n" + self.log_tail()) from None

    def log_tail(self, n: int = 30) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")):
            try:
                lines = path.read_text(errors="replace").splitlines()[-n:]
            except OSError:
                continue
            out.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def run(self, *argv: str) -> str:
        out = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"{argv}: {out.stderr}")
        return out.stdout

    def cancel_all(self, timeout: float = 30.0) -> None:
        """Cancel every job and wait (bounded) until none runs any more."""
        jobs = self.jobs_active()
        if jobs:
            subprocess.run(["scancel", "--quiet", *jobs], env=self.env, capture_output=True, timeout=30)
        try:
            wait_for(lambda: not self._running_steps(), "every job step to end", timeout, 0.2)
        except AssertionError:
            pass   # as before: the caller goes on (stop() then ends the daemons themselves)

    def resume_node(self, node: str, timeout: float = 60.0) -> None:
        """Bring a node an earlier step downed back into service (the next tests need both nodes)."""
        def in_service() -> bool:
            state = self.run("sinfo", "-h", "-n", node, "-o", "%t").strip()
            if state and not state.startswith(("down", "drain", "fail")):
                return True   # idle, or already running the next job
            if state.startswith("down") or state.startswith("drain"):
                subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env=self.env,
                               capture_output=True, timeout=30)
            return False
        self._wait(in_service, f"node {node} to be back in service", timeout)

    def squeue_json(self) -> dict:
        """Every job Slurm still lists, as `squeue --json --states=all` (22.05's --json lists all
        jobs whatever -j says)."""
        return json.loads(self.run("squeue", "--json", "--states=all"))

    def jobs_active(self) -> list[str]:
        return [j for j in self.run("squeue", "-h", "-t", "PD,R,CG,S,CF", "-o", "%i").split() if j]

    def stop(self) -> None:
        """Cancel every job, then stop the daemons we started (by pid, never by name)."""
        try:
            if self.procs and all(p.poll() is None for p in self.procs):
                self.cancel_all(20)
        except Exception:  # noqa: BLE001 - teardown goes on whatever the cluster says
            pass
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        self._kill_leftover_steps()
        for f in self._logs:
            f.close()

    def _running_steps(self) -> bool:
        out = subprocess.run(["squeue", "-h", "-t", "R,CG", "-o", "%i"], env=self.env, capture_output=True,
                             text=True, timeout=10)
        return bool(out.stdout.strip())

    def _kill_leftover_steps(self) -> None:
        """slurmstepd outlives slurmd by design; ours are the ones reading our config's spool.
        The jobs' own processes too (a batch script's `sleep`, whatever its name): killing a
        step daemon leaves its children behind, which happened when a cancel had not finished
        within its bounded wait on a loaded host. Theirs is our config's SLURM_CONF."""
        import psutil
        spool = str(self.root / "spool")
        for p in psutil.process_iter(["name", "cmdline"]):
            try:
                if p.info["name"] == "slurmstepd" and any(spool in a for a in (p.info["cmdline"] or [])):
                    p.kill()
                    continue
                if p.pid != os.getpid() and p.environ().get("SLURM_CONF") == str(self.conf):
                    p.kill()
            except Exception:  # noqa: BLE001
                continue

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    c = SlurmCluster().start()
    print(f"export SLURM_CONF={c.conf}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
