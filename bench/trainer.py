"""Is the trainer's input pipeline fast enough to keep training fed, and what do
the trainer's callbacks cost against a plain Keras loop?

Part 1, the input pipeline. Measures training steps per second of the same
compiled model fed two ways:

  tfrecord  the real pipeline of trainer.data: TFRecord shards on disk, parsed,
            JPEG decode-and-crop, resize, flip, shuffled, batched, prefetched
  cached    a few of those batches, decoded and augmented once, cached in memory
            and repeated: training with the input cost removed

and prints both rates and their ratio (target: tfrecord >= 0.9 x cached). Blocks
of steps alternate between the two feeds, and the median block counts, so a
neighbour process briefly stealing CPU does not decide the result.

On a CPU-only machine the model and the pipeline share the same cores, so the
ratio is the fraction of training throughput the input pipeline costs. The
model (ResNet50, random init) and sizes are chosen so a step is as heavy
relative to one image's decode as in the real cassava run (ResNet50 at 224 px
from ~500x375 JPEGs), while a run stays within a couple of minutes on 2 cores.
A last line measures the pipeline alone at the real cassava geometry: what it
can deliver to an accelerator, against the ~57 images/s one T4 consumed in the
seed article (89 steps x 64 images in ~100 s).

Part 2, trainer versus plain Keras. The same model, the same data and the same
model.fit arguments, in the same process, alternating: `plain` is a 20-line
Keras script's fit (no callbacks), `trainer` adds the callbacks the chief of a
real run gets from trainer.callbacks.training_callbacks (NaN guard,
BackupAndRestore, per-epoch checkpoints and their pruning, TensorBoard, the
progress line). Steady-state epochs (each fit's first epoch is left out: it
holds one-off work a real run pays once) give the ratio; every callback's hooks
are timed in place, so the table says where the difference goes. Checkpoint
writes cost the same per epoch on any hardware, so they are also shown as a
share of the seed article's 100 s ResNet50 epoch on a T4.

Run: .venv/bin/python bench/trainer.py [--quick] [--only pipeline|callbacks]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import trainer  # noqa: E402,F401  (tf-keras before TensorFlow)
from trainer import data  # noqa: E402
from trainer.config import parse_args  # noqa: E402
from trainer.model import build_model, compile_model  # noqa: E402
from trainer.records import write_shards  # noqa: E402

SEED_ARTICLE_T4_IMAGES_PER_SEC = 89 * 64 / 100
SEED_ARTICLE_T4_EPOCH_SECONDS = 100
_HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
          "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end")


def make_shards(root: Path, count: int, size: tuple[int, int], shards: int, classes: int = 5) -> str:
    """JPEGs with some structure (smooth colour fields + noise), like photos
    compress, rather than pure noise, which decodes unrealistically slowly."""
    rng = np.random.default_rng(0)
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w]
    examples = []
    for i in range(count):
        label = i % classes
        base = np.stack([np.sin(xx / (7 + c + label) + rng.uniform(0, 6)) for c in range(3)], -1)
        pixels = 127 + 90 * base + rng.normal(0, 12, (h, w, 3))
        encoded = tf.io.encode_jpeg(np.clip(pixels, 0, 255).astype(np.uint8), quality=90).numpy()
        examples.append((encoded, label))
    write_shards(examples, str(root / "train"), shards)
    return str(root / "train-*")


def config(pattern: str, image_size: int, batch: int):
    return parse_args([f"--train-files={pattern}", "--num-classes=5", "--model=resnet50", "--weights=none",
                       f"--image-size={image_size}", f"--batch-size={batch}", "--steps-per-epoch=1000"],
                      environ={})


def time_block(train_function, iterator, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        logs = train_function(iterator)
    float(logs["loss"])  # wait for the last step to finish
    return steps / (time.perf_counter() - start)


def pipeline_alone(pattern: str, image_size: int, batch: int, batches: int) -> float:
    ds = data.make_inputs(config(pattern, image_size, batch), batch, num_workers=1).train
    it = iter(ds)
    for _ in range(3):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        images, _ = next(it)
    images.numpy()
    return batches * batch / (time.perf_counter() - start)


def pipeline_part(args) -> None:
    rounds, steps = (2, 3) if args.quick else (6, 4)
    h, w = (int(v) for v in args.source_size.split("x"))

    tf.keras.utils.set_random_seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        pattern = make_shards(Path(tmp) / "small", 512, (h, w), shards=8)
        cfg = config(pattern, args.image_size, args.batch_size)
        real = data.make_inputs(cfg, args.batch_size, num_workers=1).train
        cached = real.take(8).cache().repeat()

        model = build_model("resnet50", 5, args.image_size, weights="none")
        compile_model(model, 1e-3)
        train_function = model.make_train_function()
        feeds = {"tfrecord": iter(real), "cached": iter(cached)}
        for it in feeds.values():  # trace, fill the cache, warm the pipeline
            time_block(train_function, it, 6)
        rates: dict[str, list[float]] = {name: [] for name in feeds}
        for _ in range(rounds):
            for name, it in feeds.items():
                rates[name].append(time_block(train_function, it, steps))

        small_alone = pipeline_alone(pattern, args.image_size, args.batch_size, batches=20 if args.quick else 60)
        big = make_shards(Path(tmp) / "cassava-like", 256, (375, 500), shards=4)
        alone = pipeline_alone(big, 224, 64, batches=6 if args.quick else 12)

    median = {name: statistics.median(r) for name, r in rates.items()}
    ratio = median["tfrecord"] / median["cached"]
    print(f"== 1. input pipeline, {os.cpu_count()} CPU cores, TensorFlow {tf.__version__}")
    print(f"model resnet50 (random init) at {args.image_size}x{args.image_size}, batch {args.batch_size}, "
          f"512 JPEGs ({h}x{w}) in 8 TFRecord shards; {rounds} alternating blocks of {steps} steps per feed")
    print()
    print(f"{'feed':<12}{'steps/s':>10}{'images/s':>11}   blocks (steps/s)")
    for name in ("tfrecord", "cached"):
        blocks = " ".join(f"{r:.2f}" for r in rates[name])
        print(f"{name:<12}{median[name]:>10.2f}{median[name] * args.batch_size:>11.1f}   {blocks}")
    verdict = "ok" if ratio >= 0.9 else "BELOW TARGET"
    print(f"{'ratio':<12}{ratio:>10.3f}{'':>11}   target >= 0.90: {verdict}")
    print(f"{'pipeline':<12}{small_alone / args.batch_size:>10.2f}{small_alone:>11.1f}   "
          "the tfrecord feed alone, no training (same geometry)")
    # The pipeline needs median_rate/alone of the CPU that it has when alone:
    # the training throughput it can cost at most, free of the blocks' noise.
    share = median["cached"] * args.batch_size / small_alone
    print(f"CPU share the pipeline needs at the cached rate: {100 * share:.1f} % "
          f"(expected ratio ~{1 - share:.3f})")
    print()
    print(f"pipeline alone at cassava geometry (500x375 JPEG -> 224 px, batch 64): {alone:.0f} images/s "
          f"(one T4 in the seed article consumed ~{SEED_ARTICLE_T4_IMAGES_PER_SEC:.0f} images/s)")
    print()


class EpochTimer(tf.keras.callbacks.Callback):
    """Wall time of each epoch (training and validation), for both variants alike."""

    def __init__(self):
        super().__init__()
        self.seconds: list[float] = []
        self._start = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def time_hooks(callback: tf.keras.callbacks.Callback, spent: dict[str, float]) -> None:
    """Wrap the callback's hooks in place with timers adding to spent[hook kind].
    functools.wraps keeps Keras' "is this hook the default one" marker, so the
    set of hooks Keras decides to call does not change."""
    for hook in _HOOKS:
        method = getattr(callback, hook)

        @functools.wraps(method)
        def timed(*a, _method=method, _kind=hook, **kw):
            start = time.perf_counter()
            try:
                return _method(*a, **kw)
            finally:
                spent[_kind] = spent.get(_kind, 0.0) + time.perf_counter() - start

        setattr(callback, hook, timed)


def callbacks_part(args) -> None:
    from trainer import events
    from trainer.callbacks import training_callbacks
    from trainer.cluster import ClusterInfo

    # The progress callback's JSON lines would interleave with the table: send them nowhere.
    events._out = open(os.devnull, "w")

    rounds, epochs, steps = (1, 2, 4) if args.quick else (args.rounds, 3, args.steps_per_epoch)
    size, batch = args.image_size, args.batch_size
    tf.keras.utils.set_random_seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-callbacks-") as tmp:
        root = Path(tmp)
        pattern = make_shards(root / "data", 256, tuple(int(v) for v in args.source_size.split("x")), shards=4)
        cfg = parse_args([f"--train-files={pattern}", f"--eval-files={pattern}", "--num-classes=5",
                          f"--model={args.model}", "--weights=none", f"--image-size={size}",
                          f"--batch-size={batch}", f"--steps-per-epoch={steps}", f"--epochs={epochs}",
                          f"--model-dir={root / 'model'}", f"--checkpoint-dir={root / 'ckpt'}",
                          f"--tensorboard-dir={root / 'logs'}"], environ={})
        inputs = data.make_inputs(cfg, batch, num_workers=1)
        # The same batches for both variants: decoded once, then served from memory.
        train = inputs.train.take(steps).cache().repeat()
        validation = inputs.validation.take(2).cache()
        model = build_model(args.model, 5, size, weights="none")
        compile_model(model, 1e-3)
        model.fit(train, epochs=1, steps_per_epoch=steps, validation_data=validation, verbose=0)  # trace, fill caches

        # The chief of a job with an evaluator pool: every callback there is (without an
        # evaluator the per-epoch checkpoints and their pruning are left out).
        cluster = ClusterInfo(has_evaluator=args.evaluator)
        epoch_seconds: dict[str, list[float]] = {"plain": [], "trainer": []}
        first_epoch: dict[str, list[float]] = {"plain": [], "trainer": []}
        spent: dict[str, dict[str, float]] = {}
        names: list[str] = []
        for _ in range(rounds):
            for variant in ("plain", "trainer"):
                timer = EpochTimer()
                callbacks: list[tf.keras.callbacks.Callback] = [timer]
                if variant == "trainer":
                    extra = training_callbacks(cfg, cluster, steps_per_epoch=steps, global_batch=batch,
                                               start_fields={})
                    names = [type(cb).__name__ for cb in extra]
                    for cb in extra:
                        time_hooks(cb, spent.setdefault(type(cb).__name__, {}))
                    callbacks = extra + [timer]
                model.fit(train, epochs=epochs, steps_per_epoch=steps, validation_data=validation,
                          callbacks=callbacks, verbose=0)
                # BackupAndRestore deletes the attribute at the end of fit; a next fit expects it.
                model._training_state = None
                first_epoch[variant].append(timer.seconds[0])
                epoch_seconds[variant].extend(timer.seconds[1:])
        checkpoint_mb = sum(p.stat().st_size for p in (root / "ckpt").rglob("*") if p.is_file()) / 1e6

    median = {v: statistics.median(s) for v, s in epoch_seconds.items()}
    ratio = median["plain"] / median["trainer"]
    fits = rounds
    print(f"== 2. trainer versus a plain Keras loop, {os.cpu_count()} CPU cores, TensorFlow {tf.__version__}")
    print(f"model {args.model} (random init) at {size}x{size}, batch {batch}, {steps} steps per epoch and 2 "
          f"validation batches, data cached in memory; {rounds} alternating fits of {epochs} epochs per variant; "
          f"trainer = the chief of a job {'with' if args.evaluator else 'without'} an evaluator")
    print()
    print(f"{'variant':<10}{'s/epoch':>10}{'steps/s':>10}   steady-state epochs (s)")
    for v in ("plain", "trainer"):
        blocks = " ".join(f"{x:.2f}" for x in epoch_seconds[v])
        print(f"{v:<10}{median[v]:>10.3f}{steps / median[v]:>10.2f}   {blocks}")
    verdict = "ok" if ratio >= 0.95 else "BELOW TARGET"
    print(f"{'ratio':<10}{ratio:>10.3f}{'':>10}   trainer throughput / plain, target >= 0.95: {verdict}")
    print()
    print("time inside each trainer callback's hooks, per steady-state epoch "
          "(one-off per-run hooks, on_train_begin/end, separately):")
    print(f"{'callback':<24}{'per epoch':>12}{'batch hooks':>13}{'per run':>10}")
    total_epoch = 0.0
    for name in names:
        kinds = spent.get(name, {})
        per_run = (kinds.get("on_train_begin", 0) + kinds.get("on_train_end", 0)) / fits
        epoch_part = sum(v for k, v in kinds.items() if k not in ("on_train_begin", "on_train_end"))
        # Every fit ran `epochs` epochs; spread the hook time over all of them.
        per_epoch = epoch_part / (fits * epochs)
        batch_part = sum(v for k, v in kinds.items() if "batch" in k) / (fits * epochs)
        total_epoch += per_epoch
        print(f"{name:<24}{per_epoch * 1000:>10.1f} ms{batch_part * 1000:>10.2f} ms{per_run:>9.2f} s")
    print(f"{'all callbacks':<24}{total_epoch * 1000:>10.1f} ms = {100 * total_epoch / median['plain']:.1f} % "
          f"of a plain epoch here, {100 * total_epoch / SEED_ARTICLE_T4_EPOCH_SECONDS:.2f} % of the seed "
          f"article's {SEED_ARTICLE_T4_EPOCH_SECONDS} s T4 epoch")
    # The hook times are exact; the epoch medians carry whatever else ran on the machine.
    print(f"expected ratio from the hook times: {median['plain'] / (median['plain'] + total_epoch):.3f} here, "
          f"{SEED_ARTICLE_T4_EPOCH_SECONDS / (SEED_ARTICLE_T4_EPOCH_SECONDS + total_epoch):.3f} at the seed "
          "article's epoch length")
    print(f"checkpoint dir after the runs: {checkpoint_mb:.0f} MB; first epochs (s): plain "
          + " ".join(f"{x:.2f}" for x in first_epoch["plain"]) + ", trainer "
          + " ".join(f"{x:.2f}" for x in first_epoch["trainer"]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer, shorter blocks (a smoke run)")
    p.add_argument("--only", choices=("pipeline", "callbacks"), help="run one part")
    p.add_argument("--image-size", type=int, default=64)
    # Model cost scales with the input pixels, decode cost with the stored
    # pixels: 64^2/224^2 ~ 100x134/(375x500), the cassava proportions.
    p.add_argument("--source-size", default="100x134", help="HxW of the stored JPEGs")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--model", default="resnet50", help="part 2's model (the seed article's by default)")
    p.add_argument("--steps-per-epoch", type=int, default=12, help="part 2's epoch length")
    p.add_argument("--rounds", type=int, default=3, help="part 2's alternating fits per variant")
    p.add_argument("--no-evaluator", dest="evaluator", action="store_false",
                   help="part 2: the chief of a job without an evaluator (no per-epoch checkpoints)")
    args = p.parse_args()
    if args.only in (None, "pipeline"):
        pipeline_part(args)
    if args.only in (None, "callbacks"):
        callbacks_part(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
