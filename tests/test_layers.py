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


# The functions over 60 lines that say why they must be one (a comment or docstring near their
# top saying "60 lines"), each with its length when the bound came in (issue 50.5): they may
# shrink, never grow. A new one needs its reason and a line here, in the same review.
_LONG_EXCUSED: dict[str, int] = {
    "service/backends/local/wrapper.py::main": 74,
    "service/backends/slurm/launcher.py::main": 67,
    "service/backends/vertex/config.py::load": 76,
    "service/interop/safe_yaml.py::_loader": 123,
    "service/logs/fanout.py::follow": 65,
    "service/ui/launch.py::read_form": 69,
    "service/web/problems.py::install": 84,
}


def _long_functions(sources) -> dict[str, tuple[int, str]]:
    """{path::name: (lines, the first lines of it)} of every function over 60 lines."""
    import ast

    out = {}
    for path in sources:
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > 60:
                name = f"{path.relative_to(ROOT).as_posix()}::{node.name}"
                out[name] = (node.end_lineno - node.lineno + 1, " ".join(lines[node.lineno - 1:node.lineno + 12]))
    return out


def test_no_long_function_without_a_reason():
    """No function in service/ or trainer/ over 60 lines unless a comment (or docstring) near its
    top says why it must be one and _LONG_EXCUSED bounds it at its length (docs/DESIGN.md,
    conventions)."""
    trainer = sorted(p for p in (ROOT / "trainer").rglob("*.py") if "__pycache__" not in p.parts)
    found = _long_functions([*_service_sources(), *trainer])
    unexcused = [name for name, (_, head) in found.items() if "60 lines" not in head or name not in _LONG_EXCUSED]
    grown = [f"{name}: {n} lines, bound {_LONG_EXCUSED[name]}: split it"
             for name, (n, _) in found.items() if name in _LONG_EXCUSED and n > _LONG_EXCUSED[name]]
    gone = [name for name in _LONG_EXCUSED if name not in found]   # split or renamed: its line goes too
    assert (unexcused, grown, gone) == ([], [], []), f"over 60 lines with no reason or bound: {unexcused}; "\
                                                    f"grown: {grown}; no longer there: {gone}"


MAX_FILE_LINES = 450


def test_no_file_in_service_over_450_lines():
    """Small files named for what they hold (docs/DESIGN.md, conventions): a module that grows past
    450 lines is split by concern (issue 50.5: slurm/backend.py, core/config.py and
    persistence/models.py were split), not excused."""
    big = {p.relative_to(ROOT).as_posix(): n for p in _service_sources()
           if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert big == {}, f"over {MAX_FILE_LINES} lines, split by concern: {big}"


# Where the database decides what happens: every test there runs on SQLite and on PostgreSQL.
DATABASE_FOLDERS = ("auth", "budgets", "capacity", "jobs", "lifecycle", "persistence", "scheduling", "sweeps",
                    "templates", "usage", "webhooks", "whatif")


def test_what_the_database_decides_runs_on_both_databases():
    """ONE_DATABASE (tests/conftest.py) is for tests whose subject the database does not decide;
    a test of the store, the submit, the queue or the lifecycle keeps its PostgreSQL run."""
    tests = Path(__file__).parent
    marked = [str(f.relative_to(tests)) for folder in DATABASE_FOLDERS for f in (tests / folder).rglob("*.py")
              if "ONE_DATABASE" in f.read_text() or "one_database" in f.read_text()]
    assert marked == [], f"one database only where the database decides: {marked}"
