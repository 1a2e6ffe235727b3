"""Where a preempted job's next attempt may go on (lifecycle/continuation.py, issue 52.5): on the
backends it accepts that reach its checkpoints (the same shared output folder), else where it was."""
from service.lifecycle.continuation import OutputPlace, plan

SHARED = "/srv/trainjobs/outputs"
PLACES = {"local": OutputPlace("/srv/trainjobs/outputs", SHARED), "slurm": OutputPlace("/srv/trainjobs/outputs", SHARED),
          "vertex": OutputPlace("gs://bucket/out")}
ACCEPTS = [{"backend": "vertex", "demand": {"vcpu": 4}}, {"backend": "slurm", "demand": {"vcpu": 4}},
           {"backend": "local", "demand": {"core": 1}}]


def test_a_job_preempted_on_local_may_go_on_on_slurm_which_shares_the_folder():
    p = plan("local", {"core": 1}, ACCEPTS, {"prefer": "cheapest", "start_by": 1.8e9, "prices": {"slurm": 1.0}}, PLACES)
    assert p.accepts == ACCEPTS[1:]                 # its own order, vertex left out
    assert (p.backend, p.demand) == ("slurm", {"vcpu": 4})   # the most preferred, until placed
    assert p.words == f"continues on slurm or local: its checkpoints are in {SHARED}, which vertex cannot read"
    assert p.wish == {"prefer": "cheapest", "start_by": None, "prices": {"slurm": 1.0}}


def test_a_job_preempted_on_vertex_stays_there():
    p = plan("vertex", {"vcpu": 4}, ACCEPTS, None, PLACES)
    assert (p.backend, p.accepts, p.demand) == ("vertex", None, {"vcpu": 4})
    assert p.words == "stays on vertex: its checkpoints are in gs://bucket/out, which slurm or local cannot read"


def test_without_a_shared_folder_or_with_different_ones_it_stays():
    apart = {"local": OutputPlace("/var/runs"), "slurm": OutputPlace("/nfs/runs")}
    p = plan("slurm", {"vcpu": 4}, ACCEPTS[1:], None, apart)
    assert (p.backend, p.accepts) == ("slurm", None)
    assert p.words == "stays on slurm: its checkpoints are in /nfs/runs, which local cannot read"
    two = {"local": OutputPlace("/a", "/a"), "slurm": OutputPlace("/b", "/b")}
    assert plan("local", {"core": 1}, ACCEPTS[1:], None, two).accepts is None
    # A backend that declares nothing (an unknown place) is never assumed to share.
    assert plan("local", {"core": 1}, ACCEPTS[1:], None, {}).accepts is None


def test_a_job_of_one_backend_is_as_before():
    p = plan("local", {"core": 1}, None, None, PLACES)
    assert (p.backend, p.accepts, p.words) == ("local", None, "")
    assert plan("local", {"core": 1}, ACCEPTS[2:], None, PLACES).words == ""


def test_a_listed_wish_is_none():
    assert plan("local", {"core": 1}, ACCEPTS, {"prefer": "listed", "start_by": 1.8e9}, PLACES).wish is None
