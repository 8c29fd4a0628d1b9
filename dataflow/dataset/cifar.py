"""CIFAR-10 and CIFAR-100 from their official "python version" batches (pickled dicts),
decoded with a restricted unpickler that runs no code (see :mod:`._pickle`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..sources._memory import DataFromArrays
from ._paths import FormatError, check_choice, dataset_dir, require_file
from ._pickle import load_plain_pickle

__all__ = ["Cifar10", "Cifar100", "CifarBase"]

_SOURCE = "https://www.cs.toronto.edu/~kriz/cifar.html (the python version)"


def _files(dir: str, classnum: int) -> tuple[list[str], list[str], str]:
    if classnum == 10:
        base = os.path.join(dir, "cifar-10-batches-py")
        train = [os.path.join(base, f"data_batch_{i}") for i in range(1, 6)]
        return train, [os.path.join(base, "test_batch")], os.path.join(base, "batches.meta")
    base = os.path.join(dir, "cifar-100-python")
    return [os.path.join(base, "train")], [os.path.join(base, "test")], os.path.join(base, "meta")


def _read(files: list[str], classnum: int, stage: str) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    key = "labels" if classnum == 10 else "fine_labels"
    for path in files:
        batch = load_plain_pickle(require_file(stage, path, _SOURCE), stage)
        try:
            data, label = np.asarray(batch["data"], np.uint8), np.asarray(batch[key], np.int64)
        except (KeyError, TypeError) as e:
            raise FormatError(f"{stage}: {path}: not a CIFAR-{classnum} batch (no {e})") from e
        if data.ndim != 2 or data.shape[1] != 3072 or len(label) != len(data):
            raise FormatError(
                f"{stage}: {path}: expected N x 3072 pixels and N labels, got {data.shape} and {len(label)}"
            )
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(label)
    return np.ascontiguousarray(np.concatenate(images)), np.concatenate(labels)


class CifarBase(DataFromArrays):
    """``[image, label]``: ``image`` a 32x32x3 ``uint8`` HWC array, ``label`` an int. tensorpack's
    arguments (``shuffle`` defaults to ``True`` for ``"train"``); files are found in ``dir``, else
    ``$TENSORPACK_DATASET/cifar{10,100}_data``, else ``~/tensorpack_data/cifar{10,100}_data``,
    in the official layout (``cifar-10-batches-py/data_batch_1`` ... ``test_batch``,
    ``batches.meta``; ``cifar-100-python/train``, ``test``, ``meta``). Random access:
    shuffles with ``self.rng``, checkpoints and shards by index."""

    def __init__(
        self,
        train_or_test: str,
        shuffle: bool | None = None,
        dir: Any = None,
        cifar_classnum: int = 10,
        seed: int | None = None,
    ) -> None:
        stage = type(self).__name__
        self.train_or_test = check_choice(stage, "train_or_test", train_or_test, ("train", "test"))
        if cifar_classnum not in (10, 100):
            raise ValueError(f"{stage}: cifar_classnum must be 10 or 100, got {cifar_classnum!r}")
        self.cifar_classnum = cifar_classnum
        self.dir = dataset_dir(f"cifar{cifar_classnum}_data", dir)
        train, test, self._meta_file = _files(self.dir, cifar_classnum)
        self.fs = train if train_or_test == "train" else test
        self.images, self.labels = _read(self.fs, cifar_classnum, stage)
        if shuffle is None:
            shuffle = train_or_test == "train"
        super().__init__([self.images, self.labels], shuffle=shuffle, seed=seed)

    def get_label_names(self) -> list[str]:
        """The name of each class, from the dataset's meta file."""
        stage = type(self).__name__
        meta = load_plain_pickle(require_file(stage, self._meta_file, _SOURCE), stage)
        names = meta.get("label_names" if self.cifar_classnum == 10 else "fine_label_names")
        if names is None:
            raise FormatError(f"{stage}: {self._meta_file}: no class names in the meta file")
        return [n.decode() if isinstance(n, bytes) else str(n) for n in names]

    def get_per_pixel_mean(self, names: tuple[str, ...] = ("train", "test")) -> np.ndarray:
        """The mean 32x32x3 ``float32`` image over the given splits."""
        train, test, _ = _files(self.dir, self.cifar_classnum)
        split = {"train": train, "test": test}
        files = [f for n in names for f in split[check_choice(type(self).__name__, "names", n, tuple(split))]]
        images, _ = _read(files, self.cifar_classnum, type(self).__name__)
        return images.astype(np.float32).mean(axis=0)  # type: ignore[no-any-return]

    def get_per_channel_mean(self, names: tuple[str, ...] = ("train", "test")) -> np.ndarray:
        """The mean of each of the three channels over the given splits."""
        return self.get_per_pixel_mean(names).mean(axis=(0, 1))  # type: ignore[no-any-return]


class Cifar10(CifarBase):
    """CIFAR-10: see :class:`CifarBase`."""

    def __init__(
        self, train_or_test: str, shuffle: bool | None = None, dir: Any = None, seed: int | None = None
    ) -> None:
        super().__init__(train_or_test, shuffle, dir, 10, seed=seed)


class Cifar100(CifarBase):
    """CIFAR-100 (fine labels): see :class:`CifarBase`."""

    def __init__(
        self, train_or_test: str, shuffle: bool | None = None, dir: Any = None, seed: int | None = None
    ) -> None:
        super().__init__(train_or_test, shuffle, dir, 100, seed=seed)
