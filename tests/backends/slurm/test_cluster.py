"""The test cluster itself: two nodes come up in a temporary folder, and stopping it
leaves no daemon or task of it behind."""
from __future__ import annotations

import psutil

from tests.backends.slurm.cluster import SlurmCluster


def test_cluster_has_two_nodes_and_stops_cleanly(slurm_cluster):
    # The session's cluster: both nodes idle, each named for its own address.
    nodes = slurm_cluster.run("scontrol", "show", "nodes", "-o")
    assert "NodeName=n1 " in nodes and "NodeAddr=127.0.0.11" in nodes
    assert "NodeName=n2 " in nodes and "NodeAddr=127.0.0.12" in nodes

    # A second cluster beside it (own ports, munge socket and ClusterName), then stopped.
    other = SlurmCluster()
    try:
        other.start()
        out = other.run("sbatch", "--parsable", "--uid=nobody", "--gid=nogroup", "--chdir=/tmp",
                        "--output=/dev/null", "--wrap", "sleep 600")
        assert out.strip().isdigit()
        pids = [p.pid for p in other.procs]
        assert other.name != slurm_cluster.name
    finally:
        other.stop()
        other.remove()
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert not other.root.exists()
    leftovers = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SLURM_CONF") == str(other.conf):
                leftovers.append(p)
        except psutil.Error:
            continue
    assert not leftovers, leftovers
    # The session's cluster is untouched: both nodes still in service.
    states = dict(line.split() for line in slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %t").splitlines())
    assert set(states) == {"n1", "n2"} and not any(s.startswith(("down", "drain")) for s in states.values())
