"""The hardware a replica was promised versus what TensorFlow can use.

* TRAINJOBS_EXPECTED_GPUS (set by the service from the pool's
  accelerator_count): fewer visible GPUs is an error at start, naming what
  TensorFlow sees and the CUDA/cuDNN it was built for. Otherwise a CUDA/cuDNN
  mismatch in the image trains quietly on the CPU, and --mixed-precision
  quietly becomes bfloat16.
* All-reduce across workers: TensorFlow uses NCCL only when asked (its AUTO is
  ring all-reduce), so the trainer asks for NCCL when the replica has GPUs.
* Reduction Server: needs NCCL and Google's reduction client, an NCCL network
  plugin that NCCL loads by name (libnccl-net.so, or libnccl-net-<name>.so
  with NCCL_NET_PLUGIN=<name>). Without it the workers all-reduce among
  themselves and the reducer pool idles, billed.

The decisions are pure functions of what was listed, so they are tested
without a GPU; `visible_gpus` and `build_versions` are the only places that
ask TensorFlow.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence

from trainer.errors import ConfigError

EXPECTED_GPUS_ENV = "TRAINJOBS_EXPECTED_GPUS"
_DRIVER_FILE = "/proc/driver/nvidia/version"


def expected_gpus(environ: Mapping[str, str]) -> int:
    raw = environ.get(EXPECTED_GPUS_ENV, "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{EXPECTED_GPUS_ENV}={raw!r} is not a whole number") from None
    if value < 0:
        raise ConfigError(f"{EXPECTED_GPUS_ENV}={raw!r} is negative")
    return value


def visible_gpus() -> list[str]:
    import tensorflow as tf

    return [d.name for d in tf.config.list_physical_devices("GPU")]


def build_versions() -> dict[str, object]:
    import tensorflow as tf

    info = dict(tf.sysconfig.get_build_info())
    info["tensorflow"] = tf.__version__
    return info


def nvidia_driver(path: str = _DRIVER_FILE) -> str | None:
    try:
        with open(path) as f:
            return f.readline().strip() or None
    except OSError:
        return None


def check_gpus(expected: int, visible: Sequence[str], build: Mapping[str, object], driver: str | None) -> None:
    """Refuse to start with fewer GPUs than the pool asked for."""
    if expected <= len(visible):
        return
    seen = f"{len(visible)} ({', '.join(visible)})" if visible else "none"
    if build.get("is_cuda_build"):
        built = (f"TensorFlow {build.get('tensorflow', '?')} is built for CUDA {build.get('cuda_version', '?')} "
                 f"and cuDNN {build.get('cudnn_version', '?')}")
    else:
        built = f"TensorFlow {build.get('tensorflow', '?')} is a build without CUDA support"
    driver_text = f"NVIDIA driver: {driver}" if driver else f"no NVIDIA driver found ({_DRIVER_FILE} is missing)"
    raise ConfigError(
        f"this replica's pool has {expected} GPU(s) ({EXPECTED_GPUS_ENV}={expected}) but TensorFlow sees {seen}; "
        f"{built}; {driver_text}. The image's CUDA/cuDNN libraries (or the tensorflow[and-cuda] wheels) must "
        "match that TensorFlow and the machine's driver: TensorFlow's stderr above says which library failed "
        "to load. Training on the CPU instead would be silently slow, so the trainer stops"
    )


def all_reduce(requested: str, num_gpus: int, reduction_server: bool) -> str:
    """The collective implementation for MultiWorkerMirroredStrategy: NCCL or RING."""
    if requested == "auto":
        choice = "nccl" if num_gpus else "ring"
    else:
        choice = requested
    if choice == "nccl" and not num_gpus:
        raise ConfigError("--all-reduce=nccl needs GPUs, and TensorFlow sees none on this replica")
    if reduction_server and choice != "nccl":
        raise ConfigError("the job has a Reduction Server pool, which only works with NCCL all-reduce between "
                          "GPU workers; this replica " + ("has no GPUs" if not num_gpus else
                                                          "was told --all-reduce=ring"))
    return choice.upper()


def communication_options(implementation: str):
    import tensorflow as tf

    impl = tf.distribute.experimental.CommunicationImplementation[implementation]
    return tf.distribute.experimental.CommunicationOptions(implementation=impl)


def nccl_net_plugin(environ: Mapping[str, str]) -> str:
    """The library name NCCL loads as its network plugin."""
    name = environ.get("NCCL_NET_PLUGIN", "").strip()
    if not name:
        return "libnccl-net.so"
    return name if name.endswith(".so") else f"libnccl-net-{name}.so"


def check_reduction_client(environ: Mapping[str, str] = os.environ) -> None:
    """Refuse a Reduction Server job when the reduction client cannot be loaded
    the way NCCL loads it (dlopen by name)."""
    library = nccl_net_plugin(environ)
    try:
        ctypes.CDLL(library)
    except OSError as exc:
        raise ConfigError(
            f"the job has a Reduction Server pool but this image lacks Google's reduction client: NCCL could not "
            f"load {library} ({exc}). Install the google-reduction-server package as Google's Reduction Server "
            "documentation shows, or remove the reduction_server pool"
        ) from None
