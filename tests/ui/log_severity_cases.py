"""One table of log lines and their severities, held to by the server's classifier
(service/ui/severity.py, tests/ui/test_severity.py) and the browser's (TJ.classifier
in static/common.js, tests/ui/test_browser.py): live lines colour as loaded ones do."""

# (message, severity) in the order one replica printed them.
CASES: list[tuple[str, str]] = [
    ("hello from workerpool0-0 as chief:0", ""),
    ("2026-11-25 10:00:00.000001: I tensorflow/core/platform/cpu_feature_guard.cc:210] info on stderr", ""),
    ("I1125 10:00:00.123456 140 trainer.py:12] INFO: training starts", ""),
    ("INFO:root:epoch 1 done, loss 0.5", ""),
    ('{"event": "epoch_end", "epoch": 1, "metrics": {"loss": 0.5}}', ""),
    ("an error rate of 0.1 is fine", ""),
    ("WARNING:tensorflow:5 out of the last 5 calls triggered tf.function retracing", "warning"),
    ("W1125 10:00:00.123456 140 trainer.py:12] slow input", "warning"),
    ("2026-11-25 10:00:00.000001: W tensorflow/core/framework/op.cc:12] an op warning", "warning"),
    ("/usr/lib/python3/site.py:3: UserWarning: this is deprecated", "warning"),
    ("UserWarning: this is deprecated", "warning"),
    ("2026-11-25 10:00:00.000001: E external/xla/cuda_driver.cc:282] failed call to cuInit: UNKNOWN ERROR (303)",
     "error"),
    ("E1125 10:00:00.123456 140 cuda_dnn.cc:8310] Unable to register cuDNN factory", "error"),
    ("ERROR:root:the data set is missing", "error"),
    ("CRITICAL: disk full", "error"),
    ("Traceback (most recent call last):", "traceback"),
    ('  File "/app/train.py", line 40, in <module>', "traceback"),
    ("    main()", "traceback"),
    ("tensorflow.python.framework.errors_impl.NotFoundError: gs://bucket/x; No such object", "error"),
    ("after the traceback, an ordinary line", ""),
    ("KeyboardInterrupt", "error"),
    ("usage: trainer.py [-h] [--epochs EPOCHS]", ""),
    ("trainer.py: error: unrecognized arguments: --epoch 3", "error"),  # argparse's fatal line (issue 37)
    ("the error: part of a sentence", ""),
]
