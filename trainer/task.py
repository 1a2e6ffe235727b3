"""Entry point: `python -m trainer.task [flags]` (run `--help` for the flags).

parse flags -> build config -> create strategy -> build the model inside
strategy.scope() -> fit -> save. The role comes from TF_CONFIG (see
trainer.cluster): chief and workers train, an evaluator evaluates checkpoints,
parameter servers serve (only with --strategy=parameter_server).

Exit status: 0 on success; 2 with a one-line `trainer: error: ...` on stderr
for a configuration error (flags, TF_CONFIG, data, outputs, missing GPUs); 3,
also with one such line, when the trainer stopped the run itself (the other
replicas never came, the loss diverged); 1 for anything else (with
TensorFlow's traceback).

stdout carries the JSON progress lines only (trainer/events.py).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import importlib.util
import os
import sys
from collections.abc import Sequence

import trainer  # noqa: F401  (selects tf-keras before TensorFlow is imported)
from trainer import events, hardware, startup_noise
from trainer.cluster import ClusterInfo, check_role, parse_environment
from trainer.config import TrainConfig, parse_args
from trainer.errors import ConfigError, TrainerError
from trainer.notice import NOTICE

# TensorFlow's class names are historical (MWMS is CollectiveAllReduceStrategy).
_STRATEGY_NAMES = {
    "mwms": "MultiWorkerMirroredStrategy",
    "mirrored": "MirroredStrategy",
    "default": "DefaultStrategy",
    "parameter_server": "ParameterServerStrategy",
}


def main(argv: Sequence[str] | None = None) -> int:
    events.claim_stdout()
    NOTICE.listen()               # before TensorFlow starts a thread (trainer/notice.py)
    try:
        cfg = parse_args(argv)
        cluster = parse_environment(os.environ)
        NOTICE.task = cluster.task_name
        check_role(cluster, cfg.strategy)
        expected_gpus = hardware.expected_gpus(os.environ)
        events.set_common_fields(trial=cluster.trial)
        # TensorFlow is imported only now, so the mistakes above are reported
        # in milliseconds rather than after a multi-second import.
        return train(cfg, cluster, expected_gpus)
    except TrainerError as exc:
        if NOTICE.given:
            return NOTICE.failed_to_save(exc)
        print(f"trainer: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except Exception as exc:
        # After SIGTERM a peer may already be gone: the collective that would have saved fails
        # (UnavailableError) before the watchdog fires. The stop, not the job, caused it.
        if NOTICE.given:
            return NOTICE.failed_to_save(exc)
        raise


def train(cfg: TrainConfig, cluster: ClusterInfo, expected_gpus: int = 0) -> int:
    # TensorFlow's CUDA start-up lines, expected on a replica given no GPU, are
    # dropped from its log; nothing else is (trainer/startup_noise.py).
    with startup_noise.quiet_startup(expected_gpus):
        import tensorflow as tf

        gpus = hardware.visible_gpus()

    from trainer import checkpoints, data, distribute, evaluator
    from trainer.callbacks import training_callbacks
    from trainer.events import note

    task = cluster.task_name
    # 0. Everything that can be checked alone, before waiting for anybody.
    _check_alone(cfg, cluster, expected_gpus, gpus)
    if cluster.is_evaluator:
        distribute.set_mixed_precision(cfg.mixed_precision)
        tf.keras.utils.set_random_seed(cfg.seed)
        return evaluator.run_sidecar(cfg, cluster)
    strategy_name, all_reduce = _strategy_and_all_reduce(cfg, cluster, len(gpus))
    parameter_server = strategy_name == "parameter_server"
    if parameter_server and cluster.task_type in ("worker", "ps"):
        note(f"{task} serving the parameter-server cluster (it runs until the job is torn down)")
        distribute.run_server(cluster)  # blocks until the job is torn down
        return 0

    strategy, peers = _join_cluster(cfg, cluster, strategy_name, all_reduce)
    if not parameter_server:                  # there batch hooks are refused: it exits at once, as before
        NOTICE.save_first(task, cfg.preemption_save_seconds)
    policy = distribute.set_mixed_precision(cfg.mixed_precision)
    tf.keras.utils.set_random_seed(cfg.seed)

    # 2. Input: batched at the global batch, which MWMS splits over the replicas.
    replicas = strategy.num_replicas_in_sync
    global_batch = data.global_batch_size(cfg.batch_size, replicas)
    inputs, train_data, validation_data = _input(cfg, cluster, strategy, strategy_name, bool(peers), global_batch)
    model = _compiled_model(cfg, strategy, inputs.num_classes)

    # 4. Callbacks (trainer/callbacks.py holds their order).
    if cluster.is_chief:
        checkpoints.clear_done_marker(cfg.checkpoint_dir)
    callbacks = training_callbacks(
        cfg, cluster, steps_per_epoch=inputs.steps_per_epoch, global_batch=global_batch,
        parameter_server=parameter_server,
        preemption=None if parameter_server else (NOTICE, strategy, strategy_name == "mwms" and bool(peers)),
        start_fields=_start_fields(cfg, cluster, strategy_name, all_reduce, len(gpus), replicas, global_batch,
                                   inputs, policy))
    if not cluster.is_chief:
        note(f"{task} training ({replicas} replicas in sync); the chief reports progress")
    _fit_and_save(cfg, cluster, model, train_data, validation_data, inputs.steps_per_epoch, callbacks)
    return 0


def _check_alone(cfg: TrainConfig, cluster: ClusterInfo, expected_gpus: int, gpus: list) -> None:
    """What a replica can check by itself: TensorBoard, GPUs, the TFRecords' first records, the
    output directories."""
    from trainer import data, outputs

    if (cluster.is_chief or cluster.is_evaluator) and importlib.util.find_spec("tensorboard") is None:
        # TensorFlow 2.21 no longer depends on it, and without it tf.summary
        # fails only at the end of the first epoch.
        raise ConfigError("TensorBoard logging needs the 'tensorboard' package in the trainer's environment")
    hardware.check_gpus(expected_gpus, gpus, hardware.build_versions(), hardware.nvidia_driver())
    if cfg.is_tfrecord:
        data.check_tfrecord_inputs(cfg)
    outputs.check_outputs(cfg, cluster)


def _strategy_and_all_reduce(cfg: TrainConfig, cluster: ClusterInfo, num_gpus: int) -> tuple[str, str]:
    from trainer import distribute

    strategy_name = distribute.choose_strategy(cfg.strategy, cluster, num_gpus=num_gpus)
    if cluster.reduction_server and strategy_name != "mwms":
        raise ConfigError(f"the job has a Reduction Server pool, which needs MultiWorkerMirroredStrategy, "
                          f"not --strategy={cfg.strategy}")
    all_reduce = hardware.all_reduce(cfg.all_reduce, num_gpus, cluster.reduction_server)
    if cluster.reduction_server:
        hardware.check_reduction_client()
    return strategy_name, all_reduce


def _join_cluster(cfg: TrainConfig, cluster: ClusterInfo, strategy_name: str, all_reduce: str):
    """1. The strategy comes first: MWMS sets up the collective runtime. Its constructor waits
    for every peer inside TensorFlow (for up to an hour, silently), so the replicas first find
    each other with a deadline. Returns (the strategy, the peers waited for)."""
    from trainer import distribute, rendezvous
    from trainer.events import note

    task = cluster.task_name
    peers = cluster.peers_to_wait_for(strategy_name)
    if peers:
        waited = rendezvous.wait_for_peers(task, cluster.address, peers, cfg.cluster_timeout, log=note)
        note(f"{task} sees all {len(peers)} other task(s) after {waited:.0f} s; joining the TensorFlow cluster")
        # Backstop for a peer that vanishes in between: TensorFlow holds the GIL
        # while it waits, so only faulthandler's own thread can end the wait.
        faulthandler.dump_traceback_later(cfg.cluster_timeout, exit=True)
    try:
        strategy = distribute.create_strategy(strategy_name, cluster, all_reduce)
    finally:
        faulthandler.cancel_dump_traceback_later()
    return strategy, peers


def _input(cfg: TrainConfig, cluster: ClusterInfo, strategy, strategy_name: str, has_peers: bool,
           global_batch: int):
    """(the inputs, the training data, the validation data) as fit takes them."""
    from trainer import data, distribute

    count = distribute.counted_by_chief(strategy, cluster) if strategy_name == "mwms" and has_peers \
        else data.count_records
    inputs = data.make_inputs(cfg, global_batch, num_workers=max(cluster.num_workers, 1), count=count)
    train_data, validation_data = inputs.train, inputs.validation
    if strategy_name == "parameter_server":
        train_data, validation_data = _per_worker_input(cfg, global_batch), None
    return inputs, train_data, validation_data


def _compiled_model(cfg: TrainConfig, strategy, num_classes: int):
    # 3. Model and optimizer variables are created inside the scope, so they are
    #    mirrored on every replica (or placed on the parameter servers).
    from trainer import model as models

    with strategy.scope():
        model = models.build_model(cfg.model, num_classes, cfg.image_size, cfg.weights, cfg.fine_tune_layers)
        models.compile_model(model, cfg.learning_rate)
    return model


def _start_fields(cfg: TrainConfig, cluster: ClusterInfo, strategy_name: str, all_reduce: str, gpus: int,
                  replicas: int, global_batch: int, inputs, policy: str) -> dict:
    """What train_start says besides the epochs (docs/trainer.md, "Progress lines")."""
    return {
        "strategy": _STRATEGY_NAMES[strategy_name], "replicas": replicas,
        "workers": _training_workers(cluster, strategy_name), "all_reduce": all_reduce if strategy_name == "mwms" else None,
        "gpus": gpus, "global_batch_size": global_batch, "steps_per_epoch": inputs.steps_per_epoch,
        "train_examples": inputs.train_examples, "train_examples_from": inputs.examples_from,
        "shard_policy": inputs.shard_policy, "model": cfg.model, "dataset": cfg.dataset, "precision": policy,
    }


def _fit_and_save(cfg: TrainConfig, cluster: ClusterInfo, model, train_data, validation_data, steps_per_epoch: int,
                  callbacks: list) -> None:
    from trainer import checkpoints, distribute
    from trainer.events import emit, note

    # 5. Fit. A diverged loss raises out of fit (TrainingDiverged): nothing below runs.
    model.fit(
        train_data,
        epochs=cfg.epochs,
        steps_per_epoch=steps_per_epoch,
        validation_data=validation_data,
        callbacks=callbacks,
        verbose=0,
    )
    if cluster.is_chief:
        checkpoints.write_done_marker(cfg.checkpoint_dir, cfg.epochs)

    # 6. Save. Every replica saves (saving runs collectives); only the chief's copy is kept.
    with distribute.save_dir(cfg.model_dir, cluster.is_chief) as target:
        model.save(target, include_optimizer=False)
    if cluster.is_chief:
        emit("train_end", cluster.task_name, model_dir=cfg.model_dir, saved=True, save_path=target, epochs=cfg.epochs)
    else:
        note(f"{cluster.task_name} finished; its copy of the model went to {target} (removed): only the chief's "
             "is kept")


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
