"""A sweep trial's identity on the job it runs as.

Vertex AI's hyperparameter tuning tells each trial's replicas their trial id in
TF_CONFIG's `task.trial` ("1", "2", ...). For a CustomJob Vertex builds TF_CONFIG
itself and has no field for a trial, so trainjobs passes the id as an environment
variable in every pool's container (CLOUD_ML_TRIAL_ID, the name AI Platform Training
used for tuning trials) and as a label; the local backend, which builds TF_CONFIG
itself, also puts it in `task.trial` as Vertex's tuning does. Templates may not set
CLOUD_ML_* variables (env_policy), so the value always comes from here."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

TRIAL_ENV = "CLOUD_ML_TRIAL_ID"
SWEEP_LABEL = "trainjobs_sweep_id"
TRIAL_LABEL = "trainjobs_trial"


@dataclass(frozen=True)
class Trial:
    sweep_id: uuid.UUID
    number: int     # 1, 2, ...

    @property
    def trial_id(self) -> str:
        return str(self.number)

    def labels(self) -> dict[str, str]:
        return {SWEEP_LABEL: str(self.sweep_id), TRIAL_LABEL: self.trial_id}
