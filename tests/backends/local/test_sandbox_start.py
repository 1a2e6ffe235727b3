"""What the service says at start about the sandbox: as root it is the default; no
sandbox takes an explicit setting and is logged loudly; a machine that cannot make
namespaces (a container without CAP_SYS_ADMIN, simulated for real with setpriv)
stops the local backend with one line that says how to fix it."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

import pytest

from service.backends.local.backend import LocalBackend
from service.backends.local.entry import local_settings_of
from service.slices import Settings
from tests.backends.localkit import settings_for

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox exists only for a root service")


def test_the_sandbox_is_the_default():
    assert Settings().local_sandbox == "namespaces"


@ROOT_ONLY
def test_no_sandbox_as_root_is_logged_loudly(tmp_path, caplog):
    backend = LocalBackend(local_settings_of(settings_for(f"sqlite:///{tmp_path}/x.db", tmp_path / "runs",
                                                       local_sandbox="none")))
    with caplog.at_level(logging.WARNING, "trainjobs.backends.local"):
        backend.start_client()
    assert not backend.sandboxed
    [warning] = [r for r in caplog.records if "NOT SANDBOXED" in r.getMessage()]
    assert warning.levelno == logging.WARNING and "TRAINJOBS_LOCAL_SANDBOX=none" in warning.getMessage()


@ROOT_ONLY
def test_a_sandboxed_root_service_starts_quietly(tmp_path, caplog):
    backend = LocalBackend(local_settings_of(settings_for(f"sqlite:///{tmp_path}/x.db", tmp_path / "runs")))
    with caplog.at_level(logging.INFO, "trainjobs.backends.local"):
        backend.start_client()
    assert backend.sandboxed
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@ROOT_ONLY
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_no_namespaces_means_one_line_with_the_fix(tmp_path):
    code = ("import sys\n"
            "from service.backends.local.entry import local_settings_of\n"
            "from service.backends.local.backend import LocalBackend\n"
            "from tests.backends.localkit import settings_for\n"
            f"b = LocalBackend(local_settings_of(settings_for('sqlite:///{tmp_path}/x.db', __import__('pathlib').Path('{tmp_path}/runs'))))\n"
            "try:\n"
            "    b.start_client()\n"
            "except ValueError as e:\n"
            "    print('REFUSED', e)\n")
    out = subprocess.run(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--", sys.executable,
                          "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    [line] = [ln for ln in out.stdout.splitlines() if ln.startswith("REFUSED")]
    assert "cannot create a job's namespaces" in line and "Operation not permitted" in line
    assert "CAP_SYS_ADMIN" in line and "TRAINJOBS_LOCAL_SANDBOX=none" in line
