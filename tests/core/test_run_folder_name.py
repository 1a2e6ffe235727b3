"""Issue 48.4: a job sees its own run folder's host path (its HOME, /proc/self/mountinfo), and
the default run folders used to be named after the database (`trainjobs.db.runs`,
`<host>-<port>-<db>/runs`). Now named by a digest; a folder of the earlier naming that exists is
still used, so an upgrade moves nothing."""
from __future__ import annotations

from service.core.config import default_local_work_dir


def test_the_default_run_folders_do_not_name_the_database(tmp_path, monkeypatch):
    db = tmp_path / "payroll-secrets.db"
    runs = default_local_work_dir(f"sqlite:///{db}")
    assert runs.parent == tmp_path and "payroll" not in str(runs) and runs.name.startswith("runs-")
    assert default_local_work_dir(f"sqlite:///{db}") == runs                  # every process finds the same
    assert default_local_work_dir(f"sqlite:///{tmp_path / 'other.db'}") != runs
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    pg = default_local_work_dir("postgresql+psycopg://u@db.internal:5433/payroll_prod")
    assert "payroll" not in str(pg) and "db.internal" not in str(pg) and pg.name == "runs"


def test_an_existing_folder_of_the_earlier_naming_is_kept(tmp_path):
    db = tmp_path / "trainjobs.db"
    earlier = tmp_path / "trainjobs.db.runs"
    earlier.mkdir()
    assert default_local_work_dir(f"sqlite:///{db}") == earlier
