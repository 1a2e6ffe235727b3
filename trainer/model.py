"""Models: a Keras application backbone (or a tiny CNN for tests) plus a softmax head.

Build and compile inside `strategy.scope()` so that the variables are mirrored
(see trainer.task). The model takes raw pixels in [0, 255] and normalises them
itself, as each backbone expects, so the SavedModel needs no outside
preprocessing when served.
"""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from trainer.errors import ConfigError

# Backbone constructor and the normalisation its ImageNet weights were trained with.
_APPLICATIONS = {
    "resnet50": (tf.keras.applications.ResNet50, "caffe"),
    "densenet121": (tf.keras.applications.DenseNet121, "torch"),
    # MobileNetV3 normalises inside the application (include_preprocessing).
    "mobilenet_v3_small": (tf.keras.applications.MobileNetV3Small, "none"),
}


@tf.keras.utils.register_keras_serializable(package="trainer")
class Preprocess(tf.keras.layers.Layer):
    """[0, 255] pixels -> what the backbone expects.

    A named layer rather than a Lambda: it saves as config, not as Python
    bytecode, and a SavedModel loaded without this package still runs it from
    the traced graph.
    """

    def __init__(self, mode: str, **kwargs):
        super().__init__(**kwargs)
        self.mode = mode

    def call(self, images):
        if self.mode == "unit":
            return images / 255.0
        if self.mode in ("caffe", "torch"):
            return tf.keras.applications.imagenet_utils.preprocess_input(images, mode=self.mode)
        return images

    def get_config(self):
        return {**super().get_config(), "mode": self.mode}


def _tiny_cnn_backbone(image_size: int) -> tf.keras.Model:
    # Small enough to train in seconds on a CPU; shaped like a real backbone
    # (features -> global pooling) so the head and fine-tuning code are shared.
    return tf.keras.Sequential(
        [
            tf.keras.Input((image_size, image_size, 3)),
            tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            tf.keras.layers.GlobalAveragePooling2D(),
        ],
        name="tiny_cnn",
    )


def _local_weights_file(path: str) -> str:
    """Keras reads HDF5 weight files only from local disk; copy gs:// ones over."""
    if "://" not in path:
        if not os.path.exists(path) and not tf.io.gfile.glob(path + "*"):
            raise ConfigError(f"--weights file {path!r} does not exist")
        return path
    if not tf.io.gfile.exists(path):
        raise ConfigError(f"--weights file {path!r} does not exist")
    local = os.path.join(tempfile.mkdtemp(prefix="trainer-weights-"), os.path.basename(path))
    tf.io.gfile.copy(path, local, overwrite=True)
    return local


def build_backbone(name: str, image_size: int, weights: str) -> tuple[tf.keras.Model, str]:
    """The feature extractor and its preprocessing mode. `weights` is imagenet,
    none, or a weights file for the backbone (e.g. Keras' "_notop" ImageNet file
    copied to a bucket, for machines that cannot download it)."""
    if name == "tiny_cnn":
        backbone = _tiny_cnn_backbone(image_size)
        if weights not in ("none", "imagenet"):
            backbone.load_weights(_local_weights_file(weights))
        return backbone, "unit"
    if name not in _APPLICATIONS:
        raise ConfigError(f"unknown model {name!r}")
    constructor, mode = _APPLICATIONS[name]
    keras_weights = None if weights == "none" else weights
    if keras_weights not in (None, "imagenet"):
        keras_weights = _local_weights_file(keras_weights)
    kwargs = {"include_preprocessing": True} if name == "mobilenet_v3_small" else {}
    try:
        backbone = constructor(
            include_top=False, weights=keras_weights, input_shape=(image_size, image_size, 3),
            pooling="avg", **kwargs,
        )
    except ValueError as exc:  # e.g. a weights file for another architecture
        raise ConfigError(f"cannot build {name} with --weights={weights}: {exc}") from None
    except Exception as exc:
        # Keras' get_file raises a bare Exception("URL fetch failure on ...").
        if keras_weights == "imagenet" and "URL fetch failure" in str(exc):
            raise ConfigError(
                f"cannot download the ImageNet weights of {name} ({str(exc).splitlines()[0]}); copy Keras' "
                f"*_notop.h5 file for {name} to a bucket this job can read and pass --weights=gs://..., "
                "or use --weights=none"
            ) from None
        raise
    return backbone, mode


def build_model(
    name: str,
    num_classes: int,
    image_size: int,
    weights: str = "none",
    fine_tune_layers: int = -1,
) -> tf.keras.Model:
    backbone, mode = build_backbone(name, image_size, weights)
    pretrained = weights != "none"
    backbone.trainable = True
    if fine_tune_layers >= 0:
        # Freeze all but the top N layers: fine-tune only the most task-specific part.
        frozen = backbone.layers[: len(backbone.layers) - fine_tune_layers]
        for layer in frozen:
            layer.trainable = False

    inputs = tf.keras.Input((image_size, image_size, 3), name="image")
    x = Preprocess(mode, name="preprocess")(inputs)
    # Pretrained BatchNorm statistics stay as they are (inference mode) even for
    # unfrozen layers: small fine-tuning batches would wreck them. Training from
    # scratch needs them to learn.
    x = backbone(x, training=False if pretrained else None)
    x = tf.keras.layers.Dropout(0.2)(x)
    # float32 softmax even under mixed precision: float16 probabilities lose accuracy.
    outputs = tf.keras.layers.Dense(num_classes, activation="softmax", dtype="float32", name="probs")(x)
    return tf.keras.Model(inputs, outputs, name=f"{name}_classifier")


def compile_model(model: tf.keras.Model, learning_rate: float, steps_per_execution: int = 1) -> None:
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
        steps_per_execution=steps_per_execution,
    )
