"""TensorFlow Datasets: the real `tfds.load` path (tests prepare a small dataset on disk and
load it through this same call)."""

from __future__ import annotations

from trainer.config import TrainConfig
from trainer.errors import ConfigError


def tfds_split(cfg: TrainConfig, split: str, *, shuffle_files: bool):
    """The real `tfds.load` call: encoded images (we decode, see above) and labels."""
    import tensorflow_datasets as tfds  # only TFDS runs pay for this import

    try:
        return tfds.load(
            cfg.dataset,
            split=split,
            data_dir=cfg.data_dir,
            as_supervised=True,
            with_info=True,
            download=cfg.tfds_download,
            shuffle_files=shuffle_files,
            decoders={"image": tfds.decode.SkipDecoding()},
            read_config=tfds.ReadConfig(shuffle_seed=cfg.seed),
        )
    except tfds.core.registered.DatasetNotFoundError:
        raise ConfigError(f"--dataset={cfg.dataset!r} is not a TFDS dataset (nor synthetic or tfrecord)") from None
    except (AssertionError, ValueError) as exc:  # not prepared, or a bad split name
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = "" if cfg.tfds_download else " (prepare it first, e.g. `tfds build`, or pass --tfds-download)"
        raise ConfigError(
            f"TFDS dataset {cfg.dataset!r} split {split!r} in data_dir {cfg.data_dir or '~/tensorflow_datasets'}: "
            f"{first_line}{hint}"
        ) from None
