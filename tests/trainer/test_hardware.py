"""GPU check, all-reduce choice and the Reduction Server client check.

No GPU here: the decisions are tested on device lists given to them (the
boundary is `hardware.visible_gpus`), and the real subprocess test below runs
on what TensorFlow really sees on this machine, which is no GPU at all.
"""

import pytest
import tensorflow as tf

import trainer  # noqa: F401  (tf-keras before TensorFlow)
from tests.trainer.helpers import DEMO_ARGS, of, output_flags, run_trainer, trainer_env
from trainer import hardware
from trainer.errors import ConfigError

CUDA_BUILD = {"tensorflow": "2.21.0", "is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}


def test_the_service_and_the_trainer_agree_on_the_variable():
    from service.jobspec.cluster import EXPECTED_GPUS_ENV

    assert hardware.EXPECTED_GPUS_ENV == EXPECTED_GPUS_ENV == "TRAINJOBS_EXPECTED_GPUS"


def test_expected_gpu_count_comes_from_the_environment():
    assert hardware.expected_gpus({}) == 0
    assert hardware.expected_gpus({"TRAINJOBS_EXPECTED_GPUS": "4"}) == 4
    for bad in ("four", "-1", "1.5"):
        with pytest.raises(ConfigError, match="TRAINJOBS_EXPECTED_GPUS"):
            hardware.expected_gpus({"TRAINJOBS_EXPECTED_GPUS": bad})


def test_fewer_gpus_than_the_pool_has_is_an_error_naming_what_tensorflow_sees():
    seen = ["/physical_device:GPU:0", "/physical_device:GPU:1"]
    with pytest.raises(ConfigError) as err:
        hardware.check_gpus(4, seen, CUDA_BUILD, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15")
    message = str(err.value)
    assert "pool has 4 GPU(s)" in message and "TensorFlow sees 2 (/physical_device:GPU:0, /physical_device:GPU:1)" in message
    assert "CUDA 12.5.1 and cuDNN 9" in message and "550.54.15" in message

    with pytest.raises(ConfigError, match="sees none.*without CUDA support.*no NVIDIA driver found"):
        hardware.check_gpus(1, [], {"tensorflow": "2.21.0", "is_cuda_build": False}, None)
    # Enough (or more) GPUs, or none asked for: nothing to say.
    hardware.check_gpus(2, seen, CUDA_BUILD, None)
    hardware.check_gpus(1, seen, CUDA_BUILD, None)
    hardware.check_gpus(0, [], CUDA_BUILD, None)


def test_nccl_on_gpus_ring_on_cpus():
    assert hardware.all_reduce("auto", num_gpus=8, reduction_server=False) == "NCCL"
    assert hardware.all_reduce("auto", num_gpus=0, reduction_server=False) == "RING"
    assert hardware.all_reduce("ring", num_gpus=8, reduction_server=False) == "RING"
    assert hardware.all_reduce("auto", num_gpus=1, reduction_server=True) == "NCCL"
    with pytest.raises(ConfigError, match="--all-reduce=nccl needs GPUs"):
        hardware.all_reduce("nccl", num_gpus=0, reduction_server=False)
    with pytest.raises(ConfigError, match="Reduction Server .* has no GPUs"):
        hardware.all_reduce("auto", num_gpus=0, reduction_server=True)
    with pytest.raises(ConfigError, match="Reduction Server .* --all-reduce=ring"):
        hardware.all_reduce("ring", num_gpus=2, reduction_server=True)


def test_the_options_handed_to_multi_worker_mirrored_strategy():
    impl = tf.distribute.experimental.CommunicationImplementation
    assert hardware.communication_options("NCCL").implementation == impl.NCCL
    assert hardware.communication_options("RING").implementation == impl.RING


def test_reduction_client_is_looked_up_the_way_nccl_loads_it():
    assert hardware.nccl_net_plugin({}) == "libnccl-net.so"
    assert hardware.nccl_net_plugin({"NCCL_NET_PLUGIN": "gcp"}) == "libnccl-net-gcp.so"
    assert hardware.nccl_net_plugin({"NCCL_NET_PLUGIN": "/opt/x/libfoo.so"}) == "/opt/x/libfoo.so"
    # This machine has no reduction client: the check refuses, naming the fix.
    with pytest.raises(ConfigError, match="lacks Google's reduction client.*libnccl-net.so.*google-reduction-server"):
        hardware.check_reduction_client({})
    # A library that does load passes (Python's own _ctypes module stands in for the plugin).
    import _ctypes

    hardware.check_reduction_client({"NCCL_NET_PLUGIN": _ctypes.__file__})


def test_a_gpu_pool_on_a_machine_without_gpus_stops_at_start(tmp_path):
    """The real trainer on this GPU-less machine, told its pool has one GPU."""
    run = run_trainer([*DEMO_ARGS, "--epochs=1", "--steps-per-epoch=1", *output_flags(tmp_path)],
                      trainer_env(TRAINJOBS_EXPECTED_GPUS="1"))
    assert run.returncode == 2, run.explain()
    error = run.stderr.rstrip().splitlines()[-1]
    assert error.startswith("trainer: error: this replica's pool has 1 GPU(s)")
    assert "TensorFlow sees none" in error and f"TensorFlow {tf.__version__}" in error
    assert of(run.events, "train_start") == []
    assert not (tmp_path / "model" / "saved_model.pb").exists()
