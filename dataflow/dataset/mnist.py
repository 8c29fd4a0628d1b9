"""MNIST and Fashion-MNIST from their official idx files (``*-idx3-ubyte[.gz]``)."""

from __future__ import annotations

import gzip
import os
from typing import Any

import numpy as np

from ..sources._memory import DataFromArrays
from ._paths import FormatError, check_choice, dataset_dir, missing

__all__ = ["FashionMnist", "Mnist", "read_idx"]

_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(path: str, magic: int, stage: str = "read_idx") -> np.ndarray:
    """The array in an idx file (gzipped or not) whose magic number must be ``magic``
    (2051: uint8 images, 2049: uint8 labels). Raises :class:`FormatError` naming the file for a
    wrong magic number or a truncated file."""
    opener: Any = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise FormatError(f"{stage}: {path}: cannot read it ({e})") from e
    ndim = magic & 0xFF
    head = 4 + 4 * ndim
    found = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None
    if found != magic or len(raw) < head:
        raise FormatError(f"{stage}: {path}: magic number {found}, expected {magic}; not an MNIST idx file")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    count = int(np.prod(shape))
    if len(raw) - head < count:
        raise FormatError(f"{stage}: {path}: truncated, {len(raw) - head} of {count} bytes of data")
    return np.frombuffer(raw, np.uint8, count, head).reshape(shape)


class Mnist(DataFromArrays):
    """``[image, label]``: ``image`` a 28x28 ``float32`` array in ``[0, 1]``, ``label`` a
    ``uint8`` class. tensorpack's arguments; files are found in ``dir``, else
    ``$TENSORPACK_DATASET/mnist_data``, else ``~/tensorpack_data/mnist_data`` (gzipped or not).
    Random access: shuffles with ``self.rng``, checkpoints by index, shards by index."""

    _DIR_NAME = "mnist_data"
    _SOURCE_URL = "http://yann.lecun.com/exdb/mnist/"

    def __init__(
        self, train_or_test: str, shuffle: bool = True, dir: Any = None, seed: int | None = None
    ) -> None:
        stage = type(self).__name__
        self.train_or_test = check_choice(stage, "train_or_test", train_or_test, ("train", "test"))
        folder = dataset_dir(self._DIR_NAME, dir)
        images, labels = (self._find(stage, folder, name) for name in _FILES[train_or_test])
        self.images = read_idx(images, 2051, stage).astype(np.float32) / 255.0
        self.labels = read_idx(labels, 2049, stage)
        if len(self.images) != len(self.labels):
            raise FormatError(f"{stage}: {len(self.images)} images but {len(self.labels)} labels in {folder}")
        super().__init__([self.images, self.labels], shuffle=shuffle, seed=seed)

    def _find(self, stage: str, folder: str, name: str) -> str:
        for candidate in (name + ".gz", name):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
        raise missing(stage, os.path.join(folder, name + ".gz"), self._SOURCE_URL)


class FashionMnist(Mnist):
    """Same as :class:`Mnist`, for Fashion-MNIST (``fashion_mnist_data``)."""

    _DIR_NAME = "fashion_mnist_data"
    _SOURCE_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"

    def get_label_names(self) -> list[str]:
        """The name of each class."""
        return ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]  # fmt: skip
