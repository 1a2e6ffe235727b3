"""The end every input pipeline shares: (encoded image, label) records decoded (with training
augmentation), batched at the global batch size and prefetched. Model-specific normalisation
lives in the model, so a SavedModel takes raw pixels."""

from __future__ import annotations

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE


def _crop_window(image_shape: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    # Inception-style random crop, kept gentle (>= 40 % of the area) because
    # disease marks on a leaf can be small.
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        image_shape,
        bounding_boxes=tf.zeros([1, 0, 4]),
        min_object_covered=0.1,
        aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.4, 1.0),
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    return begin, size


def decode_for_training(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """Random crop + flip. JPEGs are decoded only inside the crop window, which
    is the expensive part of the pipeline on CPU."""

    def jpeg() -> tf.Tensor:
        begin, size = _crop_window(tf.image.extract_jpeg_shape(encoded))
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)

    def other() -> tf.Tensor:
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        begin, size = _crop_window(tf.shape(image))
        return tf.slice(image, begin, size)

    image = tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    image = tf.image.resize(image, [image_size, image_size])
    image = tf.image.random_flip_left_right(image)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def decode_for_eval(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image = tf.image.resize(image, [image_size, image_size])
    return tf.ensure_shape(image, [image_size, image_size, 3])


def _finish(
    records: tf.data.Dataset,
    *,
    training: bool,
    image_size: int,
    global_batch: int,
    shuffle_buffer: int,
    seed: int,
    ordered: bool,
) -> tf.data.Dataset:
    """(encoded image, label) records -> batched, prefetched (image, label)."""
    if training:
        # Shuffle the small encoded records, not decoded images: cheap in memory.
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
        decode = decode_for_training
    else:
        decode = decode_for_eval
    ds = records.map(
        lambda encoded, label: (decode(encoded, image_size), tf.cast(label, tf.int32)),
        num_parallel_calls=AUTOTUNE,
        deterministic=ordered,
    )
    # Training batches are always full (the stream repeats); the validation set
    # keeps its short last batch so every example counts once.
    ds = ds.batch(global_batch, drop_remainder=training)
    return ds.prefetch(AUTOTUNE)


# ---------------------------------------------------------------------------
# Sources
