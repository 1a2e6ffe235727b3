"""The packaged MultiWorkerMirroredStrategy trainer (`python -m trainer.task`).

Keras 3, the default `tf.keras` since TensorFlow 2.16, cannot run `model.fit`
under MultiWorkerMirroredStrategy (keras-team/keras#20585). The switch to the
Keras 2 line (tf-keras) is only honoured if it is set before TensorFlow is first
imported, so it lives here: importing any trainer module sets it.
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
# TensorFlow's C++ INFO lines (oneDNN, CUDA probing) drown the progress lines in
# replica logs; warnings and errors still get through. A caller's choice wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
