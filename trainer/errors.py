"""The errors the entry turns into one `trainer: error: ...` line and an exit code.

Exit codes: 2 for a misconfigured job (flags, TF_CONFIG, data, outputs,
hardware: retrying the same job won't help); 3 for a run the trainer stopped
itself (the cluster never formed, the loss diverged); 1 is left to crashes,
which keep TensorFlow's traceback.
"""


class TrainerError(Exception):
    exit_code = 1


class ConfigError(TrainerError):
    """The job is misconfigured (flags, TF_CONFIG, missing data): retrying won't help."""

    exit_code = 2


class ClusterError(TrainerError):
    """The replicas did not find each other in time."""

    exit_code = 3


class TrainingDiverged(TrainerError):
    """The loss became NaN or infinite; nothing was saved."""

    exit_code = 3
