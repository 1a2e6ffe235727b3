"""TensorFlow's start-up lines about CUDA on a replica that was given no GPU.

TensorFlow 2.21 (a CUDA build) prints these on every start on a machine without
an NVIDIA driver, whatever the environment says:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I... port.cc:153] oneDNN custom operations are on. ...          (printed twice: two libraries)
    I... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)

None can be turned off at its cause: the INFO lines are logged from static
initialisers before TensorFlow reads TF_CPP_MIN_LOG_LEVEL, and cuInit is
called (and its failure logged at ERROR) whenever TensorFlow lists its devices;
CUDA_VISIBLE_DEVICES="" or "-1" changes neither (checked with 2.21: the same
lines). Raising TF_CPP_MIN_LOG_LEVEL to 3 would hide the cuInit line, and every
real error of the whole run with it.

So the trainer drops exactly these lines, and only:
* during the start-up window (importing TensorFlow and listing its GPUs),
* on a replica that expects no GPU (TRAINJOBS_EXPECTED_GPUS unset or 0): for
  it, "no CUDA" is the expected outcome. A GPU replica's window is untouched,
  so a broken CUDA install stays in its log above the trainer's own error.
* INFO lines only while TF_CPP_MIN_LOG_LEVEL says INFO is not wanted (the
  trainer's default, trainer/__init__.py): the level TensorFlow fails to
  apply to them itself.
Every other line (warnings, other errors, a crash) is passed through as it
comes, by a forked filter process, so nothing is lost if the trainer dies in
the window.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping

# absl's prefix: severity letter, MMDD, time, thread id, file:line].
_ABSL = r"[IWEF]\d{4} [\d:.]+\s+\d+ "
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_INFO = re.compile(r"I\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")
_CUINIT = re.compile(_ABSL + r"cuda_platform\.cc:\d+\] failed call to cuInit: ")
# How long the trainer waits for the filter to pass on the window's last lines
# (so they come before the trainer's next ones); it normally ends at once.
_DRAIN_SECONDS = 5.0


def min_log_level(environ: Mapping[str, str]) -> int:
    try:
        return int(environ.get("TF_CPP_MIN_LOG_LEVEL", "0").strip() or "0")
    except ValueError:
        return 0


def is_noise(line: str, min_level: int) -> bool:
    """Whether `line`, printed while TensorFlow starts on a replica with no GPU, says
    nothing the replica's owner needs."""
    line = line.rstrip("\r\n")
    if _CUINIT.match(line):
        return True
    if min_level >= 1:
        return line == _ABSL_BANNER or bool(_INFO.match(line))
    return False


def _filter(read_fd: int, out_fd: int, min_level: int) -> None:
    with os.fdopen(read_fd, "rb") as src, os.fdopen(out_fd, "wb", buffering=0) as dst:
        for raw in src:
            if not is_noise(raw.decode("utf-8", "replace"), min_level):
                dst.write(raw)


@contextlib.contextmanager
def quiet_startup(expected_gpus: int, environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Within the block, file descriptor 2 goes through the filter (is_noise) when the
    replica expects no GPU; otherwise nothing changes."""
    if expected_gpus > 0:
        yield
        return
    level = min_log_level(environ)
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    real = os.dup(2)
    pid = os.fork()
    if pid == 0:  # the filter: reads until every writer is gone (the window ended, or the trainer died)
        status = 0
        try:
            os.close(write_fd)
            _filter(read_fd, real, level)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(read_fd)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)
        os.close(real)
        _reap(pid)


def _reap(pid: int) -> None:
    """Wait for the filter to pass the window's lines on. A process started in the window
    could keep the pipe open; the filter then goes on forwarding its lines, unwaited."""
    import threading

    done = threading.Event()

    def wait() -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        done.set()

    threading.Thread(target=wait, name="stderr-filter-reaper", daemon=True).start()
    done.wait(_DRAIN_SECONDS)
