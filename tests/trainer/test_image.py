"""The trainer image's recipe (no Docker engine here: the files it is built from).

hadolint itself runs in tests/test_images.py for both Dockerfiles."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile.trainer").read_text()


def requirements(path: Path) -> list[Requirement]:
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
    return [Requirement(ln) for ln in lines if ln]


def pins() -> dict[str, str]:
    out = {}
    for req in requirements(ROOT / "docker" / "trainer-constraints.txt"):
        (spec,) = req.specifier
        assert spec.operator == "==", f"{req} is not pinned"
        assert canonicalize_name(req.name) not in out, f"{req.name} pinned twice"
        out[canonicalize_name(req.name)] = spec.version
    return out


def test_every_requirement_of_the_image_is_pinned_and_satisfied():
    pinned = pins()
    for req in requirements(ROOT / "docker" / "trainer-requirements.txt"):
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} has no pin"
        assert req.specifier.contains(pinned[name], prereleases=True), f"{req} vs pin {pinned[name]}"
    # The CUDA libraries come pinned with tensorflow[and-cuda].
    assert {"nvidia-cudnn-cu12", "nvidia-cublas-cu12", "nvidia-nccl-cu12"} <= set(pinned)
    assert "tensorflow-io-gcs-filesystem" not in pinned


def test_the_trainer_extra_agrees_with_the_image_pins():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trainer"]
    pinned = pins()
    for text in extra:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pinned, f"the trainer extra needs {req.name}, which the image does not install"
        assert req.specifier.contains(pinned[name], prereleases=True), f"{req} vs image pin {pinned[name]}"


def _closure(roots: list[Requirement]) -> set[str]:
    """Names of everything the installed distributions of `roots` pull in (markers evaluated here)."""
    names: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()  # a package again with other extras is a new visit
    todo = [(r, frozenset(r.extras)) for r in roots]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        names.add(name)
        if (name, extras) in visited:
            continue
        visited.add((name, extras))
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue  # e.g. the NVIDIA wheels, not installed on this CPU machine
        for text in dist.requires or []:
            dep = Requirement(text)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in (extras or {""})):
                todo.append((dep, frozenset(dep.extras)))
    return names


def test_every_dependency_installed_here_with_the_trainer_is_pinned():
    # The project's environment holds the same packages (the CPU subset) at the lock's versions;
    # whatever they depend on must have a pin, or pip would pick a version at image build time.
    needed = _closure(requirements(ROOT / "docker" / "trainer-requirements.txt"))
    assert not needed - set(pins())


def test_the_image_runs_unprivileged_and_refuses_outputs_it_would_lose():
    assert re.search(r"^USER 1000:1000$", DOCKERFILE, re.M)
    assert "TRAINJOBS_IN_CONTAINER=true" in DOCKERFILE and "TF_USE_LEGACY_KERAS=1" in DOCKERFILE
    assert "-c /tmp/pip/trainer-constraints.txt" in DOCKERFILE
    assert "tensorflow-io-gcs-filesystem" not in DOCKERFILE.replace("No tensorflow-io-gcs-filesystem", "")


def test_the_build_context_is_only_what_the_image_copies():
    ignore = [ln for ln in (ROOT / "Dockerfile.trainer.dockerignore").read_text().splitlines()
              if ln and not ln.startswith("#")]
    assert ignore[0] == "*"  # nothing unless listed
    allowed = {ln[1:] for ln in ignore if ln.startswith("!")}
    copied = set()
    for line in DOCKERFILE.splitlines():
        if line.startswith("COPY "):
            sources = [w for w in line.split()[1:-1] if not w.startswith("--")]
            copied.update(sources)
    assert copied == allowed
