"""The API process never imports TensorFlow (start-up time and memory), nor, without the vertex
backend, Google's client libraries (~70 MB of a ~100 MB process)."""
import subprocess
import sys

PROGRAM = """
import sys
from fastapi.testclient import TestClient
from service.persistence import migrate
from service.app import create_app
from service.slices import Settings
url = "sqlite:///" + sys.argv[1]
migrate.upgrade(url)
s = Settings(database_url=url, local_work_dir=sys.argv[2], run_reconciler=True)
with TestClient(create_app(s)) as c:
    assert c.get("/readyz").status_code == 200
    c.get("/v1/jobs")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "tf_keras", "tensorflow_datasets"))
print("HEAVY:" + ",".join(heavy))
google = sorted(m for m in sys.modules if m.startswith(("google.cloud.", "google.api_core", "grpc")))
print("GOOGLE:" + ",".join(google[:5]))
"""


def test_service_does_not_import_tensorflow(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "db.sqlite"), str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY:\n" in out.stdout or out.stdout.strip().endswith("HEAVY:"), out.stdout


def test_a_service_without_the_vertex_backend_loads_no_google_client(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "db.sqlite"), str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "GOOGLE:\n" in out.stdout, out.stdout
