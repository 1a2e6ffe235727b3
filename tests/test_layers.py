"""The layering of service/ (pyproject.toml [tool.importlinter]): web -> domains ->
lifecycle <- backends, the compiler pure, no cycles. A broken contract fails here."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout or "broken" not in r.stdout.split("Contracts:")[-1]
    assert r.stdout.count(" KEPT") >= 9


def _service_sources():
    return sorted(p for p in (ROOT / "service").rglob("*.py") if "__pycache__" not in p.parts)


def test_only_the_wake_module_notifies():
    """lifecycle/wake.py is the one place that knows the wake channel and payloads: no other
    module sends a NOTIFY or names the channel (the leader LISTENs on wake.CHANNEL)."""
    import re

    pattern = re.compile(r"pg_notify\s*\(|\bNOTIFY\s+trainjobs|trainjobs_wake")
    offenders = []
    for path in _service_sources():
        if path.relative_to(ROOT).as_posix() == "service/lifecycle/wake.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code) and not code.lstrip().startswith(('"', "'")):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
    assert pattern.search((ROOT / "service" / "lifecycle" / "wake.py").read_text())   # the check can see one


def test_every_package_of_service_is_in_a_layer():
    """A new package must be placed in the layers contract, or nothing checks its imports."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split(":")}
    packages = {f"service.{p.name}" for p in (ROOT / "service").iterdir()
                if (p / "__init__.py").exists() or (p.suffix == ".py" and p.stem != "__init__")}
    packages = {p.removesuffix(".py") for p in packages}
    assert packages - named == set()


def test_routers_never_commit():
    """docs/DESIGN.md: a router parses, calls its domain's service and returns; the unit of
    work commits (SessionDep), or the service does where it must wake someone after commit."""
    import re

    offenders = []
    for path in _service_sources():
        if path.name != "router.py" and not path.name.endswith("_router.py"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\.commit\(\)", line.split("#", 1)[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


# Functions still to split (none today; name one here only with the issue that splits it).
_LONG_PENDING: set[str] = set()


def test_no_long_function_without_a_reason():
    """No function in service/ over 60 lines without a comment (or docstring) near its top
    saying why it must be one (docs/DESIGN.md, conventions)."""
    import ast

    offenders = []
    for path in _service_sources():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > 60:
                name = f"{path.relative_to(ROOT).as_posix()}::{node.name}"
                head = " ".join(lines[node.lineno - 1:node.lineno + 12])
                if "60 lines" not in head and name not in _LONG_PENDING:
                    offenders.append(name)
    assert offenders == []
