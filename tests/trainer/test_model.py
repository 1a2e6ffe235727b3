"""Model building: weights files, fine-tuning depth, in-model preprocessing; strategy choice."""

import json

import numpy as np
import pytest
import tensorflow as tf

import trainer  # noqa: F401  (tf-keras before TensorFlow)
from trainer import model as models
from trainer.cluster import parse_tf_config
from trainer.distribute import choose_strategy
from trainer.errors import ConfigError


def test_tiny_cnn_loads_a_weights_file(tmp_path):
    source, _ = models.build_backbone("tiny_cnn", 32, "none")
    for v in source.weights:
        v.assign(tf.random.normal(v.shape))
    path = str(tmp_path / "tiny.weights.h5")
    source.save_weights(path)
    m = models.build_model("tiny_cnn", 4, 32, weights=path)
    backbone = m.get_layer("tiny_cnn")
    for want, got in zip(source.weights, backbone.weights, strict=False):
        np.testing.assert_array_equal(want.numpy(), got.numpy())
    assert m.output_shape == (None, 4)


def test_application_backbone_weights_file_and_fine_tune_depth(tmp_path):
    # Stand-in for Keras' "_notop" ImageNet file, which cannot be downloaded here.
    source = tf.keras.applications.MobileNetV3Small(include_top=False, weights=None, input_shape=(32, 32, 3),
                                                    pooling="avg")
    kernel = next(v for v in source.weights if "kernel" in v.name)
    kernel.assign(tf.fill(kernel.shape, 0.125))
    path = str(tmp_path / "mobilenet_v3_small_notop.h5")
    source.save_weights(path)

    m = models.build_model("mobilenet_v3_small", 5, 32, weights=path, fine_tune_layers=3)
    backbone = m.get_layer("MobilenetV3small")
    loaded = next(v for v in backbone.weights if v.name == kernel.name)
    np.testing.assert_array_equal(loaded.numpy(), kernel.numpy())
    trainable_layers = [layer for layer in backbone.layers if layer.trainable]
    assert trainable_layers == backbone.layers[-3:]
    # Head trains; only the top 3 backbone layers add trainable weights.
    head = m.get_layer("probs").trainable_weights
    assert len(m.trainable_weights) == len(head) + sum(len(layer.trainable_weights) for layer in trainable_layers)

    frozen = models.build_model("mobilenet_v3_small", 5, 32, weights=path, fine_tune_layers=0)
    assert frozen.trainable_weights == frozen.get_layer("probs").trainable_weights


def test_missing_weights_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        models.build_model("mobilenet_v3_small", 5, 32, weights=str(tmp_path / "nope.h5"))


def test_model_normalises_raw_pixels_as_its_backbone_expects():
    pixels = tf.random.uniform([2, 8, 8, 3], maxval=255.0)
    caffe = models.Preprocess("caffe")(pixels)
    np.testing.assert_allclose(caffe, tf.keras.applications.resnet50.preprocess_input(pixels.numpy()), rtol=1e-5)
    torch = models.Preprocess("torch")(pixels)
    np.testing.assert_allclose(torch, tf.keras.applications.densenet.preprocess_input(pixels.numpy()), rtol=1e-5)
    np.testing.assert_allclose(models.Preprocess("unit")(pixels), pixels / 255.0, rtol=1e-6)


def test_predictions_are_probabilities():
    m = models.build_model("tiny_cnn", 3, 32)
    probs = m.predict(np.zeros((2, 32, 32, 3), np.float32), verbose=0)
    assert probs.shape == (2, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_auto_strategy_choice():
    single = parse_tf_config(None)
    cluster = parse_tf_config(json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                                          "task": {"type": "chief", "index": 0}}))
    only_chief = parse_tf_config(json.dumps({"cluster": {"chief": ["a:1"]}, "task": {"type": "chief"}}))
    assert choose_strategy("auto", cluster, num_gpus=0) == "mwms"
    assert choose_strategy("auto", cluster, num_gpus=4) == "mwms"
    assert choose_strategy("auto", single, num_gpus=2) == "mirrored"
    assert choose_strategy("auto", single, num_gpus=1) == "default"
    assert choose_strategy("auto", only_chief, num_gpus=0) == "default"
    assert choose_strategy("mwms", single, num_gpus=0) == "mwms"


@pytest.mark.parametrize("name, mode", [("resnet50", "caffe"), ("densenet121", "torch")])
def test_application_models_build_with_their_own_normalisation(name, mode):
    m = models.build_model(name, 5, 32)
    assert m.get_layer("preprocess").mode == mode
    assert m.output_shape == (None, 5)
    assert m.get_layer("probs").dtype == "float32"
