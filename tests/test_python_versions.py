"""The service supports Python 3.11 to 3.13 (pyproject's requires-python).

Only 3.11 runs on this machine (no other CPython can be installed here), so the
suite checks what can be checked without one: the lock resolves the service's
dependencies for every supported version with a binary wheel (no source build at
install), and no service module imports what 3.12 or 3.13 removed."""
import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("cp311", "cp312", "cp313")
# Removed from the standard library by PEP 594 / PEP 632 (3.12 and 3.13).
REMOVED = {"distutils", "imp", "asynchat", "asyncore", "smtpd", "aifc", "audioop", "cgi", "cgitb", "chunk",
           "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd",
           "sunau", "telnetlib", "uu", "xdrlib", "lib2to3"}


def test_requires_python_covers_3_11_to_3_13():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11,<3.14"
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    assert lock["requires-python"] == ">=3.11, <3.14"


def service_packages() -> set[str]:
    """The service's locked dependency closure (no trainer or test extras)."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    by_name = {p["name"]: p for p in lock["package"]}
    todo, seen = ["trainjobs"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for dep in by_name[name].get("dependencies", []):
            todo.append(dep["name"])
    return seen - {"trainjobs"}


def test_every_service_dependency_has_a_wheel_for_each_supported_python():
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    by_name = {p["name"]: p for p in lock["package"]}
    missing = []
    for name in sorted(service_packages()):
        if "editable" in by_name[name].get("source", {}):
            continue  # this repository's own client (clients/python): installed from source, pure Python
        wheels = [w["url"].rsplit("/", 1)[-1] for w in by_name[name].get("wheels", [])]
        if any(re.search(r"-py3-none-any\.whl$|-py2\.py3-none-any\.whl$|-abi3-", w) for w in wheels):
            continue
        for tag in SUPPORTED:
            if not any(f"-{tag}-" in w and ("manylinux" in w or "linux" in w) and "x86_64" in w for w in wheels):
                missing.append(f"{name} has no {tag} Linux wheel")
    assert not missing, missing
    assert len(service_packages()) > 30  # the closure was really walked


def test_no_service_module_imports_what_newer_pythons_removed():
    found = []
    for path in (ROOT / "service").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in REMOVED]
    assert not found
