"""Command-line flags -> one immutable TrainConfig.

Pure Python (no TensorFlow): flag mistakes fail before the TensorFlow import.
Output directories default to what Vertex AI sets from the job's base output
directory (AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR), so a job
template need not repeat them. Inside the trainer image (TRAINJOBS_IN_CONTAINER=true)
the last fallback, a directory in the container, is refused: it disappears with
the container, and the trained model with it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainer.errors import ConfigError

MODELS = ("resnet50", "densenet121", "mobilenet_v3_small", "tiny_cnn")
STRATEGIES = ("auto", "mwms", "mirrored", "default", "parameter_server")
SYNTHETIC, TFRECORD = "synthetic", "tfrecord"
# Where outputs go when neither a flag, AIP_* nor --job-dir says (local runs).
LOCAL_OUTPUT_ROOT = "trainer-output"
# Set by Dockerfile.trainer: the local fallback would be inside the container.
IN_CONTAINER_ENV = "TRAINJOBS_IN_CONTAINER"
ALL_REDUCE = ("auto", "nccl", "ring")


@dataclass(frozen=True)
class TrainConfig:
    dataset: str
    data_dir: str | None
    train_split: str
    eval_split: str
    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    image_key: str
    label_key: str
    tfds_download: bool
    synthetic_examples: int
    synthetic_eval_examples: int
    num_classes: int | None
    model: str
    weights: str  # "imagenet", "none" or a path to a weights file
    image_size: int
    epochs: int
    steps_per_epoch: int | None
    batch_size: int  # per replica
    learning_rate: float
    fine_tune_layers: int  # -1: all backbone layers train
    mixed_precision: bool
    strategy: str
    model_dir: str
    checkpoint_dir: str
    tensorboard_dir: str
    keep_checkpoints: int | None  # None: 2 when the job has an evaluator (or nothing says), else 0
    shuffle_buffer: int
    seed: int
    evaluator_timeout: float | None
    cluster_timeout: float
    all_reduce: str
    nan_check_steps: int
    preemption_check_steps: int = 5
    preemption_save_seconds: float = 25.0

    @property
    def is_synthetic(self) -> bool:
        return self.dataset == SYNTHETIC

    @property
    def is_tfrecord(self) -> bool:
        return self.dataset == TFRECORD

    @property
    def is_tfds(self) -> bool:
        return not (self.is_synthetic or self.is_tfrecord)


class _Parser(argparse.ArgumentParser):
    """argparse that raises ConfigError instead of printing usage and exiting."""

    def error(self, message: str):
        raise ConfigError(message)


def _patterns(values: list[str] | None) -> tuple[str, ...]:
    # Each flag may be repeated and may hold comma-separated patterns, so a job
    # template can pass one string.
    out: list[str] = []
    for value in values or []:
        out.extend(p.strip() for p in value.split(",") if p.strip())
    return tuple(out)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m trainer.task",
        description="Train an image classifier with tf.distribute: MultiWorkerMirroredStrategy across the "
        "replicas TF_CONFIG describes (role from TF_CONFIG). Outputs default to AIP_MODEL_DIR, "
        "AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR. See docs/trainer.md.",
    )
    _data_flags(p)
    _model_flags(p)
    _training_flags(p)
    _output_flags(p)
    return p


def _data_flags(p: argparse.ArgumentParser) -> None:
    data = p.add_argument_group("data")
    data.add_argument(
        "--dataset", default=None,
        help="a TensorFlow Datasets name (default cassava), 'tfrecord' (implied by --train-files) "
        "or 'synthetic' for smoke tests and benchmarks",
    )
    data.add_argument("--data-dir", default=None, help="TFDS data_dir holding the prepared dataset")
    data.add_argument("--train-split", default="train", help="TFDS split to train on")
    data.add_argument("--eval-split", default="validation", help="TFDS split to validate on ('' for none)")
    data.add_argument("--tfds-download", action="store_true",
                      help="let TFDS download and prepare the dataset if it is not in --data-dir")
    data.add_argument("--train-files", action="append", metavar="PATTERNS",
                      help="TFRecord file patterns (comma-separated or repeated) of tf.train.Example")
    data.add_argument("--eval-files", action="append", metavar="PATTERNS",
                      help="TFRecord file patterns for validation")
    data.add_argument("--image-key", default="image/encoded", help="Example feature with the encoded image")
    data.add_argument("--label-key", default="image/class/label", help="Example feature with the int label")
    data.add_argument("--synthetic-examples", type=int, default=2048, help="synthetic training set size")
    data.add_argument("--synthetic-eval-examples", type=int, default=256, help="synthetic validation set size")
    data.add_argument("--num-classes", type=int, default=None,
                      help="number of classes (required for TFRecords; TFDS knows it; synthetic: 5)")


def _model_flags(p: argparse.ArgumentParser) -> None:
    model = p.add_argument_group("model")
    model.add_argument("--model", default="resnet50", help=" | ".join(MODELS))
    model.add_argument("--weights", default=None,
                       help="imagenet | none | PATH to a backbone weights file "
                       "(default: imagenet, none for tiny_cnn)")
    model.add_argument("--image-size", type=int, default=224, help="square input size in pixels")
    model.add_argument("--fine-tune-layers", type=int, default=-1,
                       help="train only the top N backbone layers (0: only the head; -1: all)")


def _training_flags(p: argparse.ArgumentParser) -> None:
    train = p.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=5)
    train.add_argument("--steps-per-epoch", type=int, default=None,
                       help="default: ceil(training examples / global batch)")
    train.add_argument("--batch-size", type=int, default=64, help="per replica; global = this x replicas")
    train.add_argument("--learning-rate", type=float, default=1e-3)
    train.add_argument("--mixed-precision", action="store_true",
                       help="float16 compute on GPUs (bfloat16 elsewhere), float32 variables")
    train.add_argument("--strategy", default="auto", choices=STRATEGIES)
    train.add_argument("--all-reduce", default="auto", choices=ALL_REDUCE,
                       help="multi-worker all-reduce: auto = NCCL when the replica has GPUs, ring on CPUs")
    train.add_argument("--cluster-timeout", type=float, default=300,
                       help="seconds to wait for the other replicas to start before giving up (exit 3); "
                       "the ones missing are logged every 30 s")
    train.add_argument("--nan-check-steps", type=int, default=50,
                       help="stop (exit 3, nothing saved) when the loss is NaN or infinite, checked every N steps "
                       "and at each epoch end (0: epoch ends only)")
    train.add_argument("--preemption-check-steps", type=int, default=5,
                       help="on SIGTERM (a preemption or a cancel) every replica saves its state at the next multiple "
                       "of N steps and exits 143; the next attempt resumes from that step (one all-reduce every N "
                       "steps under MultiWorkerMirroredStrategy)")
    train.add_argument("--preemption-save-seconds", type=float, default=25.0,
                       help="a replica that has not saved this long after SIGTERM exits without saving "
                       "(keep it under the backend's grace period)")
    train.add_argument("--shuffle-buffer", type=int, default=1024)
    train.add_argument("--seed", type=int, default=42)


def _output_flags(p: argparse.ArgumentParser) -> None:
    out = p.add_argument_group("outputs (default: AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR)")
    out.add_argument("--model-dir", default=None, help="where the chief writes the SavedModel")
    out.add_argument("--checkpoint-dir", default=None,
                     help="fault-tolerance backup and per-epoch checkpoints for the evaluator")
    out.add_argument("--tensorboard-dir", default=None)
    out.add_argument("--job-dir", default=None,
                     help="legacy AI Platform base dir: outputs go to JOB_DIR/{model,checkpoints,logs}")
    out.add_argument("--keep-checkpoints", type=int, default=None,
                     help="per-epoch checkpoints kept for the evaluator (0: write none; default: 2 when the job "
                     "has an evaluator pool or the trainer cannot tell, else 0)")
    out.add_argument("--evaluator-timeout", type=float, default=None,
                     help="evaluator: give up after this many seconds without a new checkpoint")


def _output_dir(
    flag: str | None, env_name: str, environ: Mapping[str, str], job_dir: str | None, leaf: str
) -> str:
    # Flags beat the environment; AIP_* beats the local fallback.
    job_dir = job_dir.rstrip("/") if job_dir else None
    value = (
        flag
        or (os.path.join(job_dir, leaf) if job_dir else None)
        or environ.get(env_name)
        or os.path.join(LOCAL_OUTPUT_ROOT, leaf)
    )
    # AIP_* values end in "/"; strip it so joined paths and messages look normal.
    return value.rstrip("/") if len(value) > 1 else value


def parse_args(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> TrainConfig:
    environ = os.environ if environ is None else environ
    a = build_parser().parse_args(argv)
    # The checks run in this order, so the first mistake reported is the same whatever the flags.
    train_files, eval_files = _patterns(a.train_files), _patterns(a.eval_files)
    dataset = _dataset(a.dataset, train_files, eval_files)
    weights = _weights(a.model, a.weights)
    _check_numbers(a)
    num_classes = _num_classes(a.num_classes, dataset)
    dirs = _output_dirs(a, environ)

    return TrainConfig(
        dataset=dataset,
        data_dir=a.data_dir,
        train_split=a.train_split,
        eval_split=a.eval_split,
        train_files=train_files,
        eval_files=eval_files,
        image_key=a.image_key,
        label_key=a.label_key,
        tfds_download=a.tfds_download,
        synthetic_examples=a.synthetic_examples,
        synthetic_eval_examples=a.synthetic_eval_examples,
        num_classes=num_classes,
        model=a.model,
        weights=weights,
        image_size=a.image_size,
        epochs=a.epochs,
        steps_per_epoch=a.steps_per_epoch,
        batch_size=a.batch_size,
        learning_rate=a.learning_rate,
        fine_tune_layers=a.fine_tune_layers,
        mixed_precision=a.mixed_precision,
        strategy=a.strategy,
        model_dir=dirs["--model-dir"],
        checkpoint_dir=dirs["--checkpoint-dir"],
        tensorboard_dir=dirs["--tensorboard-dir"],
        keep_checkpoints=a.keep_checkpoints,
        shuffle_buffer=a.shuffle_buffer,
        seed=a.seed,
        evaluator_timeout=a.evaluator_timeout,
        cluster_timeout=a.cluster_timeout,
        all_reduce=a.all_reduce,
        nan_check_steps=a.nan_check_steps,
        preemption_check_steps=a.preemption_check_steps,
        preemption_save_seconds=a.preemption_save_seconds,
    )


def _dataset(flag: str | None, train_files: tuple[str, ...], eval_files: tuple[str, ...]) -> str:
    dataset = flag or (TFRECORD if train_files else "cassava")
    if dataset == TFRECORD and not train_files:
        raise ConfigError("--dataset=tfrecord needs --train-files")
    if train_files and dataset != TFRECORD:
        raise ConfigError(f"--train-files only go with TFRecord input, not --dataset={dataset}")
    if eval_files and not train_files:
        raise ConfigError("--eval-files given without --train-files")
    return dataset


def _weights(model: str, flag: str | None) -> str:
    if model not in MODELS:
        raise ConfigError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    weights = flag or ("none" if model == "tiny_cnn" else "imagenet")
    if weights.lower() in ("imagenet", "none"):
        weights = weights.lower()
    if model == "tiny_cnn" and weights == "imagenet":
        raise ConfigError("tiny_cnn has no ImageNet weights; use --weights=none or a weights file")
    return weights


def _check_numbers(a: argparse.Namespace) -> None:
    for name, value, low in (
        ("--epochs", a.epochs, 1), ("--batch-size", a.batch_size, 1), ("--image-size", a.image_size, 32),
        ("--synthetic-examples", a.synthetic_examples, 1), ("--synthetic-eval-examples", a.synthetic_eval_examples, 0),
        ("--keep-checkpoints", 0 if a.keep_checkpoints is None else a.keep_checkpoints, 0),
        ("--shuffle-buffer", a.shuffle_buffer, 1),
        ("--fine-tune-layers", a.fine_tune_layers, -1),
    ):
        if value < low:
            raise ConfigError(f"{name} must be at least {low}, got {value}")
    if a.steps_per_epoch is not None and a.steps_per_epoch < 1:
        raise ConfigError(f"--steps-per-epoch must be at least 1, got {a.steps_per_epoch}")
    if a.cluster_timeout <= 0:
        raise ConfigError(f"--cluster-timeout must be positive, got {a.cluster_timeout}")
    if a.nan_check_steps < 0:
        raise ConfigError(f"--nan-check-steps must be at least 0, got {a.nan_check_steps}")
    if a.preemption_check_steps < 1:
        raise ConfigError(f"--preemption-check-steps must be at least 1, got {a.preemption_check_steps}")
    if a.preemption_save_seconds <= 0:
        raise ConfigError(f"--preemption-save-seconds must be positive, got {a.preemption_save_seconds}")
    if a.learning_rate <= 0:
        raise ConfigError(f"--learning-rate must be positive, got {a.learning_rate}")


def _num_classes(flag: int | None, dataset: str) -> int | None:
    num_classes = flag
    if num_classes is None and dataset == SYNTHETIC:
        num_classes = 5
    if num_classes is None and dataset == TFRECORD:
        raise ConfigError("--num-classes is required with --train-files (TFRecords carry no class list)")
    if num_classes is not None and num_classes < 2:
        raise ConfigError(f"--num-classes must be at least 2, got {num_classes}")
    return num_classes


def _output_dirs(a: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    """{flag: directory} for the three outputs; inside the container, refused where the
    directory would be the container's own."""
    outputs = {
        "--model-dir": (a.model_dir, "AIP_MODEL_DIR", "model"),
        "--checkpoint-dir": (a.checkpoint_dir, "AIP_CHECKPOINT_DIR", "checkpoints"),
        "--tensorboard-dir": (a.tensorboard_dir, "AIP_TENSORBOARD_LOG_DIR", "logs"),
    }
    dirs = {flag: _output_dir(value, env, environ, a.job_dir, leaf) for flag, (value, env, leaf) in outputs.items()}
    if environ.get(IN_CONTAINER_ENV, "").strip().lower() in ("1", "true", "yes"):
        lost = [flag for flag, (value, env, _) in outputs.items()
                if not (value or a.job_dir or environ.get(env))]
        if lost:
            raise ConfigError(
                f"no output location for {', '.join(lost)}: without the flag, --job-dir or the AIP_* variable "
                f"(Vertex AI sets them from the job's base_output_directory) they would go to ./{LOCAL_OUTPUT_ROOT} "
                "inside the container and be lost when it exits; set base_output_directory in the job, or pass "
                "--job-dir=gs://BUCKET/PATH"
            )
    return dirs
