"""TensorFlow's CUDA start-up lines on a replica given no GPU (trainer/startup_noise.py):
dropped, and nothing else is."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from service.backends.local import isolation
from tests.trainer.helpers import DEMO_ARGS, REPO, events, of, output_flags, vertex_tf_config
from trainer import hardware
from trainer.startup_noise import is_noise, min_log_level

# What TensorFlow 2.21 printed here on every start before the fix (no NVIDIA driver).
BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ONEDNN = ("I0000 00:00:1795632468.885983   32645 port.cc:153] oneDNN custom operations are on. You may see "
          "slightly different numerical results due to floating-point round-off errors.")
CUDART = ("I0000 00:00:1795632468.886328   32645 cudart_stub.cc:31] Could not find cuda drivers on your "
          "machine, GPU will not be used.")
CUINIT = ("E0000 00:00:1795632476.421832   32645 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA "
          "error: Failed call to cuInit: UNKNOWN ERROR (303)")
OTHER_ERROR = "E0000 00:00:1795632476.421832   32645 some_kernel.cc:10] Out of memory while allocating"
WARNING = "W0000 00:00:1795632476.421832   32645 cpu_allocator.cc:5] Allocation exceeds 10% of free memory."
# The CUDA noise as the issue names it, in any form TensorFlow prints it.
CUDA_NOISE = re.compile(r"cuInit|cuda drivers|Unable to register cu(DNN|FFT|BLAS) factory|cudart_stub|"
                        r"absl::InitializeLog")


def test_only_the_known_lines_are_noise():
    for line in (BANNER, ONEDNN, CUDART, CUINIT):
        assert is_noise(line + "\n", 1), line
    assert is_noise(CUINIT, 0)  # an expected failure whatever the level
    for line in (OTHER_ERROR, WARNING, "Traceback (most recent call last):", "trainer: error: x", ""):
        assert not is_noise(line, 1), line
    # With TF_CPP_MIN_LOG_LEVEL=0 the owner asked for INFO lines: they stay.
    assert not is_noise(ONEDNN, 0) and not is_noise(CUDART, 0) and not is_noise(BANNER, 0)


def test_min_log_level():
    assert min_log_level({}) == 0
    assert min_log_level({"TF_CPP_MIN_LOG_LEVEL": "2"}) == 2
    assert min_log_level({"TF_CPP_MIN_LOG_LEVEL": "x"}) == 0


def _window(expected_gpus: int, then: str = "") -> subprocess.CompletedProcess:
    """A process writing TensorFlow's lines and others to file descriptor 2 in the window."""
    lines = [BANNER, ONEDNN, CUDART, CUINIT, OTHER_ERROR, WARNING]
    code = "\n".join([
        "import os",
        "from trainer.startup_noise import quiet_startup",
        f"with quiet_startup({expected_gpus}, {{'TF_CPP_MIN_LOG_LEVEL': '1'}}):",
        f"    for line in {lines!r}:",
        "        os.write(2, (line + '\\n').encode())",
        f"    {then or 'pass'}",
        f"os.write(2, ('after the window: ' + {CUINIT!r} + '\\n').encode())",
    ])
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_the_window_drops_the_noise_and_passes_the_rest_in_order():
    done = _window(0)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [OTHER_ERROR, WARNING, "after the window: " + CUINIT]


def test_a_gpu_replica_keeps_every_line():
    done = _window(1)
    assert done.stderr.splitlines() == [BANNER, ONEDNN, CUDART, CUINIT, OTHER_ERROR, WARNING,
                                        "after the window: " + CUINIT]


def test_a_crash_in_the_window_loses_nothing_real():
    done = _window(0, then="os.abort()")
    assert done.returncode != 0
    assert done.stderr.splitlines() == [OTHER_ERROR, WARNING]


def _replica_env(tmp_path, **extra: str) -> dict[str, str]:
    """What the local backend gives a replica (launcher.env_of): a minimal base, no
    TF_CPP_MIN_LOG_LEVEL, TF_CONFIG for a single chief."""
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    env = isolation.base_env(sys.executable, tmp_path / "home", tmp_path / "tmp")
    env["PYTHONPATH"] = str(REPO)
    env["TF_CONFIG"] = vertex_tf_config({"chief": ["127.0.0.1:1"]}, "chief", 0)
    env.update(extra)
    return env


def _trainer(tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    args = [*DEMO_ARGS, "--epochs=1", "--steps-per-epoch=2", "--batch-size=8", "--synthetic-examples=32",
            "--synthetic-eval-examples=16", *output_flags(tmp_path / "out")]
    return subprocess.run([sys.executable, "-m", "trainer.task", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_cpu_replica_trains_without_cuda_noise(tmp_path):
    done = _trainer(tmp_path, _replica_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert of(events(done.stdout), "train_end")[0]["saved"] is True
    noise = [line for line in done.stderr.splitlines() if CUDA_NOISE.search(line)]
    assert noise == [], noise


@pytest.mark.slow
def test_a_gpu_replica_without_a_gpu_still_shows_why(tmp_path):
    """TRAINJOBS_EXPECTED_GPUS=1 on a machine without one: TensorFlow's own CUDA lines stay
    above the trainer's error, which they explain."""
    if hardware.nvidia_driver() is not None:
        pytest.skip("this machine has an NVIDIA driver")
    done = _trainer(tmp_path, _replica_env(tmp_path, TRAINJOBS_EXPECTED_GPUS="1"))
    assert done.returncode == 2, done.stderr[-3000:]
    assert any("cuInit" in line or "cuda drivers" in line for line in done.stderr.splitlines()), done.stderr
    assert done.stderr.splitlines()[-1].startswith("trainer: error: this replica's pool has 1 GPU(s)")
