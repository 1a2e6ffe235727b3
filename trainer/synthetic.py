"""Synthetic data: deterministic, learnable images for demos and tests (no download)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from trainer.images import AUTOTUNE

SYNTHETIC_CLASSES = 5


def _synthetic_colours(num_classes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 255, size=(num_classes, 3)).astype(np.float32)


def synthetic_dataset(
    num_examples: int, num_classes: int, image_size: int, seed: int, stream: int = 0
) -> tf.data.Dataset:
    """Deterministic, learnable images: each class has its own colour (fixed by
    `seed`), each image is half that colour and half noise. `stream` tells
    training (0) and validation (1) examples apart. The same (seed, stream,
    index) always gives the same example, on every worker and every run."""
    colours = tf.constant(_synthetic_colours(num_classes, seed))
    label_seed, noise_seed = 1000 * seed + 2 * stream, 1000 * seed + 2 * stream + 1

    def make(index: tf.Tensor):
        label = tf.random.stateless_uniform([], seed=[label_seed, index], maxval=num_classes, dtype=tf.int32)
        noise = tf.random.stateless_uniform([image_size, image_size, 3], seed=[noise_seed, index], maxval=255.0)
        return 0.5 * colours[label] + 0.5 * noise, label

    return tf.data.Dataset.range(num_examples).map(make, num_parallel_calls=AUTOTUNE)
