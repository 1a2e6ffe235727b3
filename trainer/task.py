"""Entry point: `python -m trainer.task [flags]` (run `--help` for the flags).

parse flags -> build config -> create strategy -> build the model inside
strategy.scope() -> fit -> save. The role comes from TF_CONFIG (see
trainer.cluster): chief and workers train, an evaluator evaluates checkpoints,
parameter servers serve (only with --strategy=parameter_server).

Exit status: 0 on success, 2 with a one-line message on stderr for a
configuration error, 1 for anything else (with TensorFlow's traceback).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Sequence

import trainer  # noqa: F401  (selects tf-keras before TensorFlow is imported)
from trainer.cluster import ClusterInfo, check_role, parse_tf_config
from trainer.config import TrainConfig, parse_args
from trainer.errors import ConfigError


# TensorFlow's class names are historical (MWMS is CollectiveAllReduceStrategy).
_STRATEGY_NAMES = {
    "mwms": "MultiWorkerMirroredStrategy",
    "mirrored": "MirroredStrategy",
    "default": "DefaultStrategy",
    "parameter_server": "ParameterServerStrategy",
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cfg = parse_args(argv)
        cluster = parse_tf_config(os.environ.get("TF_CONFIG"))
        check_role(cluster, cfg.strategy)
        # TensorFlow is imported only now, so the mistakes above are reported
        # in milliseconds rather than after a multi-second import.
        return train(cfg, cluster)
    except ConfigError as exc:
        print(f"trainer: error: {exc}", file=sys.stderr, flush=True)
        return 2


def train(cfg: TrainConfig, cluster: ClusterInfo) -> int:
    import tensorflow as tf

    from trainer import checkpoints, data, distribute, evaluator, model as models
    from trainer.progress import EpochProgress, emit

    task = cluster.task_name
    if (cluster.is_chief or cluster.is_evaluator) and importlib.util.find_spec("tensorboard") is None:
        # TensorFlow 2.21 no longer depends on it, and without it tf.summary
        # fails only at the end of the first epoch.
        raise ConfigError("TensorBoard logging needs the 'tensorboard' package in the trainer's environment")
    if cluster.is_evaluator:
        distribute.set_mixed_precision(cfg.mixed_precision)
        tf.keras.utils.set_random_seed(cfg.seed)
        return evaluator.run_sidecar(cfg, cluster)

    # 1. The strategy comes first: MWMS sets up the collective runtime.
    strategy_name = distribute.choose_strategy(
        cfg.strategy, cluster, num_gpus=len(tf.config.list_physical_devices("GPU"))
    )
    if strategy_name == "parameter_server" and cluster.task_type in ("worker", "ps"):
        emit("train_start", task, role=cluster.task_type, strategy="ParameterServerStrategy")
        distribute.run_server(cluster)  # blocks until the job is torn down
        return 0
    strategy = distribute.create_strategy(strategy_name, cluster)
    distribute.exit_on_sigterm(task)
    policy = distribute.set_mixed_precision(cfg.mixed_precision)
    tf.keras.utils.set_random_seed(cfg.seed)

    # 2. Input: batched at the global batch, which MWMS splits over the replicas.
    replicas = strategy.num_replicas_in_sync
    global_batch = data.global_batch_size(cfg.batch_size, replicas)
    inputs = data.make_inputs(cfg, global_batch, num_workers=max(cluster.num_workers, 1))
    train_data, validation_data = inputs.train, inputs.validation
    if strategy_name == "parameter_server":
        train_data, validation_data = _per_worker_input(cfg, global_batch), None

    # 3. Model and optimizer variables are created inside the scope, so they are
    #    mirrored on every replica (or placed on the parameter servers).
    with strategy.scope():
        model = models.build_model(cfg.model, inputs.num_classes, cfg.image_size, cfg.weights,
                                   cfg.fine_tune_layers)
        models.compile_model(model, cfg.learning_rate)

    # 4. Callbacks. Order matters: the backup is written before the epoch line
    #    goes out, so a replica killed right after printing epoch N resumes at N+1.
    callbacks: list[tf.keras.callbacks.Callback] = [
        tf.keras.callbacks.BackupAndRestore(checkpoints.backup_dir(cfg.checkpoint_dir)),
    ]
    if cfg.keep_checkpoints:
        # All replicas: Keras routes non-chief copies to temp dirs it deletes.
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(
            checkpoints.epoch_checkpoint_pattern(cfg.checkpoint_dir), save_weights_only=True))
        if cluster.is_chief:
            callbacks.append(checkpoints.PruneEpochCheckpoints(cfg.checkpoint_dir, cfg.keep_checkpoints))
    if cluster.is_chief:
        callbacks.append(tf.keras.callbacks.TensorBoard(cfg.tensorboard_dir, update_freq="epoch", profile_batch=0))
        checkpoints.clear_done_marker(cfg.checkpoint_dir)
    callbacks.append(EpochProgress(task, cfg.epochs, inputs.steps_per_epoch, global_batch, start_fields={
        "strategy": _STRATEGY_NAMES[strategy_name], "replicas": replicas, "workers": _training_workers(cluster, strategy_name),
        "global_batch_size": global_batch, "steps_per_epoch": inputs.steps_per_epoch,
        "train_examples": inputs.train_examples, "shard_policy": inputs.shard_policy,
        "model": cfg.model, "dataset": cfg.dataset, "precision": policy,
    }))

    # 5. Fit.
    model.fit(
        train_data,
        epochs=cfg.epochs,
        steps_per_epoch=inputs.steps_per_epoch,
        validation_data=validation_data,
        callbacks=callbacks,
        verbose=0,
    )
    if cluster.is_chief:
        checkpoints.write_done_marker(cfg.checkpoint_dir, cfg.epochs)

    # 6. Save. Every replica saves (saving runs collectives); only the chief's copy is kept.
    with distribute.save_dir(cfg.model_dir, cluster.is_chief) as target:
        model.save(target, include_optimizer=False)
    # save_path shows where this replica's copy went (a removed temp dir on workers).
    emit("train_end", task, model_dir=cfg.model_dir, saved=cluster.is_chief, save_path=target,
         epochs=cfg.epochs)
    return 0


def _training_workers(cluster: ClusterInfo, strategy_name: str) -> int:
    # Under parameter-server training the chief only coordinates.
    if strategy_name == "parameter_server":
        return len(cluster.cluster.get("worker", []))
    return max(cluster.num_workers, 1)


def _per_worker_input(cfg: TrainConfig, global_batch: int):
    """Parameter-server training: each worker builds its own input pipeline, so
    each gets a different shuffle seed instead of all replaying one stream."""
    import tensorflow as tf

    from trainer import data

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        worker_cfg = dataclasses.replace(cfg, seed=cfg.seed + context.input_pipeline_id)
        batch = context.get_per_replica_batch_size(global_batch)
        return data.make_inputs(worker_cfg, batch, num_workers=1).train

    return tf.keras.utils.experimental.DatasetCreator(dataset_fn)


if __name__ == "__main__":
    sys.exit(main())
