"""create_app's lifespan (issue 35, point 6): its start is split by phase on one ExitStack, so
whatever a failed start made is undone, in reverse order, and a clean stop undoes the same."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service import app as app_module
from service.app import create_app
from service.lifecycle.protocol import Backend
from service.slices import Settings


class _Recording(Backend):
    def __init__(self, name: str, log: list[str], fail: bool = False) -> None:
        self.name, self.log, self.fail = name, log, fail

    def start_client(self) -> None:
        if self.fail:
            raise RuntimeError(f"{self.name} is misconfigured")
        self.log.append(f"start {self.name}")

    def close(self) -> None:
        self.log.append(f"close {self.name}")


@pytest.fixture
def log(monkeypatch) -> list[str]:
    """What the lifespan did, in order: backends started and closed, engines disposed."""
    done: list[str] = []
    made = app_module.make_engine

    def recording_engine(url, **kw):
        engine = made(url, **kw)
        name = "health engine" if kw.get("pool_size") == 1 else "engine"
        original = engine.dispose
        monkeypatch.setattr(engine, "dispose", lambda *a, **k: (done.append(f"dispose {name}"), original(*a, **k)))
        return engine
    monkeypatch.setattr(app_module, "make_engine", recording_engine)
    return done


def _settings(tmp_path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", run_reconciler=False, seed_demo_template=False)


def test_a_backend_that_fails_to_start_undoes_what_the_start_made(tmp_path, log):
    backends = {"a": _Recording("a", log), "b": _Recording("b", log, fail=True)}
    with pytest.raises(RuntimeError, match="b is misconfigured"):
        with TestClient(create_app(_settings(tmp_path), backends=backends)):
            pass
    assert log == ["start a", "close a", "dispose health engine", "dispose engine"]


def test_a_stop_stops_the_controller_first_and_the_engines_last(tmp_path, log, monkeypatch):
    stopped = []
    monkeypatch.setattr(app_module.Controller, "stop", lambda self: stopped.append(list(log)))
    with TestClient(create_app(_settings(tmp_path), backends={"a": _Recording("a", log)})) as c:
        assert c.get("/healthz").status_code == 200
    assert stopped == [["start a"]]   # before any backend closed
    assert log[:2] == ["start a", "close a"] and sorted(log[2:]) == ["dispose engine", "dispose health engine"]


def test_the_gil_switch_interval_is_the_settings_while_the_app_serves(tmp_path, monkeypatch):
    """TRAINJOBS_GIL_SWITCH_INTERVAL_MS: set while the app serves (from
    TRAINJOBS_GIL_FAST_SWITCH_STREAMS open log streams on; 0: always), Python's own restored
    after; out of their ranges they are refused at start (bench/load.py: GETs beside 5,000
    followers). service/web/gil.py; tests/web/test_gil.py follows the streams."""
    import sys

    from pydantic import ValidationError
    before = sys.getswitchinterval()
    assert (Settings().gil_switch_interval_ms, Settings().gil_fast_switch_streams) == (0.5, 100)
    always = {"gil_switch_interval_ms": 0.25, "gil_fast_switch_streams": 0}
    with TestClient(create_app(_settings(tmp_path).model_copy(update=always))) as c:
        assert c.get("/healthz").status_code == 200
        assert sys.getswitchinterval() == pytest.approx(0.00025)
    assert sys.getswitchinterval() == before
    with TestClient(create_app(_settings(tmp_path).model_copy(update={"gil_switch_interval_ms": 0.25}))) as c:
        assert c.get("/healthz").status_code == 200
        assert sys.getswitchinterval() == before    # no log stream open: Python's own
    for name, bad in (("GIL_SWITCH_INTERVAL_MS", "0"), ("GIL_SWITCH_INTERVAL_MS", "101"),
                      ("GIL_FAST_SWITCH_STREAMS", "-1")):
        monkeypatch.setenv(f"TRAINJOBS_{name}", bad)
        with pytest.raises(ValidationError):
            Settings()
        monkeypatch.delenv(f"TRAINJOBS_{name}")
