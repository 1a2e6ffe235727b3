"""Is the trainer's input pipeline fast enough to keep training fed?

Measures training steps per second of the same compiled model fed two ways:

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

Run: .venv/bin/python bench/trainer.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trainer  # noqa: E402,F401  (tf-keras before TensorFlow)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from trainer import data  # noqa: E402
from trainer.config import parse_args  # noqa: E402
from trainer.model import build_model, compile_model  # noqa: E402
from trainer.records import write_shards  # noqa: E402

SEED_ARTICLE_T4_IMAGES_PER_SEC = 89 * 64 / 100


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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer, shorter blocks (a smoke run)")
    p.add_argument("--image-size", type=int, default=64)
    # Model cost scales with the input pixels, decode cost with the stored
    # pixels: 64^2/224^2 ~ 100x134/(375x500), the cassava proportions.
    p.add_argument("--source-size", default="100x134", help="HxW of the stored JPEGs")
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()
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
    print(f"trainer input pipeline, {os.cpu_count()} CPU cores, TensorFlow {tf.__version__}")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
