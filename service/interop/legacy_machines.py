"""AI Platform Training's legacy machine names and scale tiers, as Compute Engine
machine types and accelerators that Vertex AI takes.

What Google documents (AI Platform REST reference, TrainingInput.masterType and
TrainingInput.ScaleTier) is relative, not a table of equivalents:
  standard         "A basic machine configuration suitable for training simple models
                   with small to moderate datasets."
  large_model      "A machine with a lot of memory, specially suited for parameter
                   servers when your model is large."
  complex_model_s  "suitable for the master and workers of the cluster when your model
                   requires more computation than the standard machine can handle"
  complex_model_m  "roughly twice the number of cores and roughly double the memory of
                   complex_model_s"; complex_model_l likewise of complex_model_m.
  *_gpu / *_p100 / *_v100: the same machine "that also includes" one (standard,
                   large_model), four (complex_model_m) or eight (complex_model_l)
                   NVIDIA Tesla K80 / P100 / V100 GPUs.
  cloud_tpu        "A TPU VM including one Cloud TPU."
The Compute Engine types below are trainjobs' reading of those sizes, so every
mapping is reported as a warning to check. The K80 has reached end of support on
Google Cloud (Vertex's AcceleratorType marks NVIDIA_TESLA_K80 deprecated), so K80
machines become T4 machines, and n1 machines take at most four T4s."""
from __future__ import annotations

from dataclasses import dataclass

from service.core.errors import Problem


@dataclass(frozen=True)
class Machine:
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0


_BASE = {
    "standard": "n1-standard-4",
    "large_model": "n1-highmem-8",
    "complex_model_s": "n1-highcpu-8",
    "complex_model_m": "n1-highcpu-16",
    "complex_model_l": "n1-highcpu-32",
}

LEGACY_MACHINES: dict[str, Machine] = {
    **{name: Machine(mt) for name, mt in _BASE.items()},
    "standard_gpu": Machine("n1-standard-4", "NVIDIA_TESLA_T4", 1),
    "complex_model_m_gpu": Machine("n1-highcpu-16", "NVIDIA_TESLA_T4", 4),
    "complex_model_l_gpu": Machine("n1-highcpu-32", "NVIDIA_TESLA_T4", 4),
    "standard_p100": Machine("n1-standard-4", "NVIDIA_TESLA_P100", 1),
    "complex_model_m_p100": Machine("n1-highcpu-16", "NVIDIA_TESLA_P100", 4),
    "standard_v100": Machine("n1-standard-4", "NVIDIA_TESLA_V100", 1),
    "large_model_v100": Machine("n1-highmem-8", "NVIDIA_TESLA_V100", 1),
    "complex_model_m_v100": Machine("n1-highcpu-16", "NVIDIA_TESLA_V100", 4),
    "complex_model_l_v100": Machine("n1-highcpu-32", "NVIDIA_TESLA_V100", 8),
}

_DOCUMENTED = {
    "standard": "a basic machine for simple models with small to moderate datasets",
    "large_model": "a machine with a lot of memory, for parameter servers of large models",
    "complex_model_s": "a machine for models that need more computation than standard",
    "complex_model_m": "roughly twice the cores and memory of complex_model_s",
    "complex_model_l": "roughly twice the cores and memory of complex_model_m",
    "standard_gpu": "standard with one NVIDIA Tesla K80",
    "complex_model_m_gpu": "complex_model_m with four NVIDIA Tesla K80s",
    "complex_model_l_gpu": "complex_model_l with eight NVIDIA Tesla K80s",
    "standard_p100": "standard with one NVIDIA Tesla P100",
    "complex_model_m_p100": "complex_model_m with four NVIDIA Tesla P100s",
    "standard_v100": "standard with one NVIDIA Tesla V100",
    "large_model_v100": "large_model with one NVIDIA Tesla V100",
    "complex_model_m_v100": "complex_model_m with four NVIDIA Tesla V100s",
    "complex_model_l_v100": "complex_model_l with eight NVIDIA Tesla V100s",
}

# The K80 is gone; the T4 is the n1 GPU closest to it in price.
RETIRED_ACCELERATORS = {"NVIDIA_TESLA_K80": "NVIDIA_TESLA_T4"}
TPU_ACCELERATORS = ("TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD")


def legacy_machine(where: str, name: str) -> tuple[Machine, Problem] | None:
    """The machine for a legacy name and the warning that says so; None for other names."""
    m = LEGACY_MACHINES.get(name)
    if m is None:
        return None
    gpus = f" with {m.accelerator_count} x {m.accelerator_type}" if m.accelerator_type else ""
    note = ""
    if name.endswith("_gpu"):
        note = " (Google retired the K80; T4s instead" + (", and n1 machines take at most four T4s, not eight"
                                                          if name == "complex_model_l_gpu" else "") + ")"
    return m, Problem(where, f"legacy machine type {name!r} ({_DOCUMENTED[name]}, as Google documents it) "
                             f"became {m.machine_type}{gpus}{note}",
                      "check the machine type and accelerators suit the job; change them in the template if not")


@dataclass(frozen=True)
class Tier:
    chief: str                       # legacy machine name of the master
    workers: int = 0
    parameter_servers: int = 0
    documented: str = ""


# TrainingInput.ScaleTier as Google documents each value. The replica counts of
# STANDARD_1 and PREMIUM_1 are not in that reference ("many workers and a few
# parameter servers"); the counts here are AI Platform's machine-types guide's
# (one master plus 4 workers and 3 parameter servers; plus 19 workers and 11
# parameter servers) and, like the machines, reported as warnings to check.
SCALE_TIERS: dict[str, Tier] = {
    "BASIC": Tier("standard", documented="A single worker instance. This tier is suitable for learning how to "
                                         "use Cloud ML, and for experimenting with new models using small datasets."),
    "BASIC_GPU": Tier("standard_gpu", documented="A single worker instance with a K80 GPU."),
    "STANDARD_1": Tier("standard", 4, 3, documented="Many workers and a few parameter servers."),
    "PREMIUM_1": Tier("standard", 19, 11, documented="A large number of workers with many parameter servers."),
}
TPU_TIERS = {"BASIC_TPU": "A single worker instance with a Cloud TPU."}
