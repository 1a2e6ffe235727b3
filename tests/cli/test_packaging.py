"""`pip install .` must give a `trainjobs` whose client commands import: every distribution the
client commands import is declared by the service's own package."""
import ast
from importlib.metadata import requires
from pathlib import Path

CLIENT_COMMANDS = Path(__file__).resolve().parents[2] / "service" / "cli" / "client"


def test_the_client_commands_dependency_is_declared():
    declared = {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip().lower()
                for r in requires("trainjobs") or [] if "extra ==" not in r}
    assert "trainjobs-client" in declared
    imported = set()
    for path in CLIENT_COMMANDS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
    assert "trainjobs_client" in imported  # the thing this test guards is still there
    # Third-party distributions the commands use, each declared by the service (import name -> dist).
    for module, dist in {"trainjobs_client": "trainjobs-client", "rich": "rich", "yaml": "pyyaml",
                         "httpx": "httpx"}.items():
        if module in imported:
            assert dist in declared, f"service/cli/client imports {module} but pyproject.toml does not declare {dist}"
